"""Weight-sharing baselines (Table 1's "Shared parameter" rows; docs/models.md#baselines-and-weight-sharing):
``shared_gpt`` reuses one GPT-2 block, x_l = Block(x_{l-1}); ``shared_ode_gpt`` is DiffEqFormer's Euler solve with
time-independent weights, x_l = x_{l-1} + dt·(Attn(LN1 x) + FF(LN2 x)), dt = 1/L."""

from dataclasses import dataclass

import equinox as eqx
import haliax as hax
import haliax.nn as hnn
from haliax import NamedArray
from haliax.jax_utils import maybe_rng_split
from levanter.layers.attention import AttentionMask
from levanter.models.gpt2 import Gpt2Block
from levanter.models.lm_model import LmConfig

from .diffeq_gpt import ParallelGptBlock
from .gpt2_dimensions import Gpt2Dimensions
from .heads import GptHeadModel


def fold_block(apply, config: Gpt2Dimensions, block, x: NamedArray, attn_mask, key) -> NamedArray:
    """x ↦ ``apply(x, block, attn_mask, layer_idx, key)`` for layer_idx = 0..L-1: one block at every layer, each
    application rematerialised."""
    keys = maybe_rng_split(key, config.num_layers) if key is not None else None
    policy = hax.ScanCheckpointPolicy.from_bool_or_str(config.gradient_checkpointing)
    return hax.fold(apply, config.Layers, remat=policy)(x, block, attn_mask, hax.arange(config.Layers), keys)


@LmConfig.register_subclass("shared_gpt")
@dataclass(frozen=True)
class SharedGptConfig(Gpt2Dimensions, LmConfig["SharedGptLMHeadModel"]):
    """Gpt2Config's fields; ``num_layers`` is how many times the single block is applied."""

    model_type = property(lambda self: SharedGptLMHeadModel)


class SharedGptTransformer(eqx.Module):
    """x ↦ LN_f(Block^L(x)) with one Gpt2Block; each application is rematerialised."""

    config: SharedGptConfig = eqx.field(static=True)
    block: Gpt2Block
    ln_f: hnn.LayerNorm

    @staticmethod
    def init(config: SharedGptConfig, *, key) -> "SharedGptTransformer":
        return SharedGptTransformer(config, Gpt2Block.init(config.gpt2(), key=key), config.final_norm())

    def __call__(self, x: NamedArray, attn_mask: AttentionMask | NamedArray, *, key=None) -> NamedArray:
        def apply_block(x, block, mask, layer_idx, key):
            return block(x, mask, layer_idx, key=key)

        return self.ln_f(fold_block(apply_block, self.config, self.block, x, attn_mask, key))


class SharedGptLMHeadModel(GptHeadModel):
    """GPT-2 embeddings, the shared-block transformer, and the tied unembedding."""

    transformer: SharedGptTransformer


@LmConfig.register_subclass("shared_ode_gpt")
@dataclass(frozen=True)
class SharedOdeGptConfig(Gpt2Dimensions, LmConfig["SharedOdeGptLMHeadModel"]):
    """Gpt2Config's fields; ``num_layers`` is the number L of Euler steps of the shared field (dt = 1/L)."""

    model_type = property(lambda self: SharedOdeGptLMHeadModel)


class SharedOdeGptTransformer(eqx.Module):
    """x ↦ LN_f(Step^L(x)) with one ParallelGptBlock of step dt = 1/L, Step(x) = x + dt·(Attn(LN1 x) + FF(LN2 x));
    each application is rematerialised."""

    config: SharedOdeGptConfig = eqx.field(static=True)
    block: ParallelGptBlock
    ln_f: hnn.LayerNorm

    @staticmethod
    def init(config: SharedOdeGptConfig, *, key) -> "SharedOdeGptTransformer":
        block = ParallelGptBlock.init(config.gpt2(), key=key, step=1.0 / config.num_layers)
        return SharedOdeGptTransformer(config, block, config.final_norm())

    def __call__(self, x: NamedArray, attn_mask: AttentionMask | NamedArray, *, key=None) -> NamedArray:
        def euler_step(x, block, mask, layer_idx, key):
            return block(x, mask, key=key)

        return self.ln_f(fold_block(euler_step, self.config, self.block, x, attn_mask, key))


class SharedOdeGptLMHeadModel(GptHeadModel):
    """GPT-2 embeddings, the shared-field Euler solve, and the tied unembedding."""

    transformer: SharedOdeGptTransformer
