"""LM shells shared by the GPT- and Llama-style models: Levanter's embeddings and head around a ``transformer``,
causal mask by default; ``init`` draws the embeddings with Levanter's initialisers and the transformer by its own.
The transformers of stacked blocks share ``FoldedTransformer``, the DiffEqFormers' ``EulerTransformer``."""

import abc
import dataclasses
import typing

import equinox as eqx
import haliax as hax
import haliax.nn as hnn
import jax.numpy as jnp
import jax.random as jrandom
from haliax import Axis, NamedArray
from haliax.jax_utils import maybe_rng_split
from levanter.layers.attention import AttentionMask
from levanter.models.gpt2 import Gpt2Embeddings
from levanter.models.llama import LlamaEmbedding
from levanter.models.lm_model import LmHeadModel


class FoldedTransformer(eqx.Module):
    """Stacked blocks (``stack``, by default the ``blocks`` field) folded over x, each rematerialised, then the final
    norm (``final_norm``, a property naming the subclass's field); ``pos_ids`` (Llama's RoPE positions) go to every
    block."""

    stack = property(lambda self: self.blocks)

    def __call__(self, x: NamedArray, attn_mask: AttentionMask | NamedArray, *, key=None, **pos_ids) -> NamedArray:
        blocks = self.stack
        keys = maybe_rng_split(key, blocks.Block.size) if key is not None else None
        return self.final_norm(blocks.fold(x, attn_mask, key=keys, **pos_ids))


class EulerTransformer(FoldedTransformer):
    """Euler solve of dx/dt = f(t, x) on (0, 1] with L = ``config.num_layers`` steps, the ``field``'s
    ``euler_blocks``, their weights generated once per call."""

    stack = property(lambda self: self.field.euler_blocks(self.config.num_layers))

    @classmethod
    def init(cls, config, *, key) -> "EulerTransformer":
        """The subclass's ``field`` (its type), randomly initialised, and the config's final norm."""
        return cls(config, typing.get_type_hints(cls)["field"].init(config, key=key), config.final_norm())


class HeadModel(LmHeadModel):
    """The part both shells share: the config is the transformer's, the vocabulary the embeddings'."""

    transformer: eqx.Module
    embeddings: eqx.Module

    config = property(lambda self: self.transformer.config)
    Vocab = property(lambda self: self.embeddings.Vocab)

    @classmethod
    def transformer_init(cls, config, *, key) -> eqx.Module:
        """The subclass's transformer (its ``transformer`` field's type), randomly initialised."""
        return typing.get_type_hints(cls)["transformer"].init(config, key=key)

    @abc.abstractmethod
    def hidden_states(self, input_ids: NamedArray, attn_mask, key, pos_ids: NamedArray | None) -> NamedArray:
        """The transformer's output on the embedded ``input_ids``."""

    def activations(
        self,
        input_ids: NamedArray,
        attn_mask: AttentionMask | NamedArray | None = None,
        *,
        key=None,
        pos_ids: NamedArray | None = None,
    ) -> NamedArray:
        """Final hidden states; ``attn_mask`` defaults to the causal mask."""
        return self.hidden_states(input_ids, AttentionMask.causal() if attn_mask is None else attn_mask, key, pos_ids)


class GptHeadModel(HeadModel):
    """Token + learned absolute position embeddings (Gpt2Embeddings) and the tied unembedding."""

    embeddings: Gpt2Embeddings

    @classmethod
    def init(cls, Vocab: Axis, config, *, key) -> "GptHeadModel":
        """Levanter's GPT-2 embeddings and the transformer, randomly initialised."""
        k_t, k_embeddings = jrandom.split(key)
        embeddings = Gpt2Embeddings.init(Vocab, config.gpt2(), key=k_embeddings)
        return cls(cls.transformer_init(config, key=k_t), embeddings)

    def hidden_states(self, input_ids: NamedArray, attn_mask, key, pos_ids: NamedArray | None) -> NamedArray:
        k_embed, k_transformer = maybe_rng_split(key, 2)
        if pos_ids is None:
            pos_ids = hax.arange(input_ids.resolve_axis("position"), dtype=jnp.int32)
        x = self.embeddings.embed(input_ids, pos_ids=pos_ids, key=k_embed)
        return self.transformer(x, attn_mask, key=k_transformer)

    def get_lm_head(self) -> NamedArray:
        return self.embeddings.token_embeddings.weight

    def resize_vocab(self, new_size: int, key=None):
        return dataclasses.replace(self, embeddings=self.embeddings.resize_embeddings(new_size, key=key))


class LlamaHeadModel(HeadModel):
    """Token embeddings only (positions come from RoPE) and an unembedding, untied unless configured."""

    embeddings: LlamaEmbedding
    lm_head: hnn.Linear | None

    @classmethod
    def init(cls, Vocab: Axis, config, *, key) -> "LlamaHeadModel":
        """Levanter's Llama token embeddings, unless tied the separate unembedding, and the transformer, randomly
        initialised."""
        k_t, k_embeddings = jrandom.split(key)
        k_emb, k_head = jrandom.split(k_embeddings)
        llama = config.llama()
        embeddings = LlamaEmbedding.init(Vocab, llama, key=k_emb)
        lm_head = None
        if not llama.tie_word_embeddings:
            lm_head = hnn.Linear.init(In=llama.Embed, Out=Vocab, key=k_head, use_bias=False, out_first=True)
        return cls(cls.transformer_init(config, key=k_t), embeddings, lm_head)

    def hidden_states(self, input_ids: NamedArray, attn_mask, key, pos_ids: NamedArray | None) -> NamedArray:
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
