"""Embedding/unembedding shells shared by the GPT-style and Llama-style models of this package.

Each wraps a ``transformer`` (hidden states in → final normalised hidden states out) between Levanter's
embeddings and the LM head, and defaults ``attn_mask`` to the causal mask.
"""

import dataclasses

import equinox as eqx
import haliax as hax
import haliax.nn as hnn
import jax.numpy as jnp
import jax.random as jrandom
from haliax import Axis, NamedArray
from haliax.jax_utils import maybe_rng_split
from levanter.layers.attention import AttentionMask
from levanter.models.gpt2 import Gpt2Embeddings
from levanter.models.llama import LlamaConfig, LlamaEmbedding
from levanter.models.lm_model import LmHeadModel


class GptHeadModel(LmHeadModel):
    """Token + learned absolute position embeddings (Gpt2Embeddings) and the tied unembedding."""

    transformer: eqx.Module
    embeddings: Gpt2Embeddings

    @property
    def config(self):
        return self.transformer.config

    @property
    def Vocab(self) -> Axis:
        return self.embeddings.Vocab

    def activations(
        self,
        input_ids: NamedArray,
        attn_mask: AttentionMask | NamedArray | None = None,
        *,
        key=None,
        pos_ids: NamedArray | None = None,
    ) -> NamedArray:
        """Final hidden states; ``attn_mask`` defaults to the causal mask."""
        k_embed, k_transformer = maybe_rng_split(key, 2)
        if pos_ids is None:
            pos_ids = hax.arange(input_ids.resolve_axis("position"), dtype=jnp.int32)
        if attn_mask is None:
            attn_mask = AttentionMask.causal()
        x = self.embeddings.embed(input_ids, pos_ids=pos_ids, key=k_embed)
        return self.transformer(x, attn_mask, key=k_transformer)

    def get_lm_head(self) -> NamedArray:
        return self.embeddings.token_embeddings.weight

    def resize_vocab(self, new_size: int, key=None):
        return dataclasses.replace(self, embeddings=self.embeddings.resize_embeddings(new_size, key=key))


class LlamaHeadModel(LmHeadModel):
    """Token embeddings only (positions come from RoPE) and an unembedding, untied unless configured."""

    transformer: eqx.Module
    embeddings: LlamaEmbedding
    lm_head: hnn.Linear | None

    @property
    def config(self):
        return self.transformer.config

    @property
    def Vocab(self) -> Axis:
        return self.embeddings.Vocab

    @staticmethod
    def init_head(Vocab: Axis, config: LlamaConfig, *, key) -> tuple[LlamaEmbedding, hnn.Linear | None]:
        """Levanter's Llama token embeddings and, unless tied, the separate unembedding."""
        k_emb, k_head = jrandom.split(key)
        embeddings = LlamaEmbedding.init(Vocab, config, key=k_emb)
        lm_head = None
        if not config.tie_word_embeddings:
            lm_head = hnn.Linear.init(In=config.Embed, Out=Vocab, key=k_head, use_bias=False, out_first=True)
        return embeddings, lm_head

    def activations(
        self,
        input_ids: NamedArray,
        attn_mask: AttentionMask | NamedArray | None = None,
        *,
        key=None,
        pos_ids: NamedArray | None = None,
    ) -> NamedArray:
        """Final hidden states; ``attn_mask`` defaults to the causal mask."""
        if attn_mask is None:
            attn_mask = AttentionMask.causal()
        return self.transformer(self.embeddings.embed(input_ids), attn_mask, key=key, pos_ids=pos_ids)

    def get_lm_head(self) -> NamedArray:
        return self.embeddings.token_embeddings.weight if self.lm_head is None else self.lm_head.weight

    def resize_vocab(self, new_size: int, key=None):
        k_emb, k_head = maybe_rng_split(key, 2)
        embeddings = self.embeddings.resize_embeddings(new_size, key=k_emb)
        if self.lm_head is None:
            return dataclasses.replace(self, embeddings=embeddings)
        weight = hax.tree_util.resize_axis(self.lm_head.weight, self.Vocab, new_size, key=k_head)
        lm_head = dataclasses.replace(self.lm_head, Out=self.Vocab.resize(new_size), weight=weight)
        return dataclasses.replace(self, embeddings=embeddings, lm_head=lm_head)
