"""Weight-sharing baseline ("Shared parameter" rows of Table 1, after Zhong et al. 2022).

One standard (sequential) GPT-2 block whose weights are reused at each of the ``num_layers`` layers:
x_l = Block(x_{l-1}), l = 1..L, with Levanter's Gpt2Block, Gpt2Embeddings and tied unembedding.
"""

from dataclasses import dataclass

import equinox as eqx
import haliax as hax
import haliax.nn as hnn
import jax.random as jrandom
from haliax import Axis, NamedArray
from haliax.jax_utils import maybe_rng_split
from levanter.layers.attention import AttentionMask
from levanter.models.gpt2 import Gpt2Block, Gpt2Embeddings
from levanter.models.lm_model import LmConfig

from .gpt2_shape import Gpt2Shape
from .heads import GptHeadModel


@LmConfig.register_subclass("shared_gpt")
@dataclass(frozen=True)
class SharedGptConfig(Gpt2Shape, LmConfig["SharedGptLMHeadModel"]):
    """Gpt2Config's fields; ``num_layers`` is how many times the single block is applied."""

    @property
    def model_type(self) -> type["SharedGptLMHeadModel"]:
        return SharedGptLMHeadModel


class SharedGptTransformer(eqx.Module):
    """x ↦ LN_f(Block^L(x)) with one Gpt2Block; each application is rematerialised."""

    config: SharedGptConfig = eqx.field(static=True)
    block: Gpt2Block
    ln_f: hnn.LayerNorm

    @staticmethod
    def init(config: SharedGptConfig, *, key) -> "SharedGptTransformer":
        gpt2 = config.gpt2()
        ln_f = hnn.LayerNorm.init(config.Embed, eps=config.layer_norm_epsilon, use_bias=config.use_bias)
        return SharedGptTransformer(config, Gpt2Block.init(gpt2, key=key), ln_f)

    def __call__(self, x: NamedArray, attn_mask: AttentionMask | NamedArray, *, key=None) -> NamedArray:
        keys = maybe_rng_split(key, self.config.num_layers) if key is not None else None

        def apply_block(x, block, mask, layer_idx, key):
            return block(x, mask, layer_idx, key=key)

        policy = hax.ScanCheckpointPolicy.from_bool_or_str(self.config.gradient_checkpointing)
        fold = hax.fold(apply_block, self.config.Layers, remat=policy)
        x = fold(x, self.block, attn_mask, hax.arange(self.config.Layers), keys)
        return self.ln_f(x)


class SharedGptLMHeadModel(GptHeadModel):
    """GPT-2 embeddings, the shared-block transformer, and the tied unembedding."""

    transformer: SharedGptTransformer

    @classmethod
    def init(cls, Vocab: Axis, config: SharedGptConfig, *, key) -> "SharedGptLMHeadModel":
        k_t, k_embeddings = jrandom.split(key)
        embeddings = Gpt2Embeddings.init(Vocab, config.gpt2(), key=k_embeddings)
        return cls(SharedGptTransformer.init(config, key=k_t), embeddings)
