"""Weight-sharing baselines ("Shared parameter" rows of Table 1). The public code has none and the paper cites
Zhong et al. 2022 (one block reused at every layer); two defensible designs (docs/paper.md#weight-sharing), both here:

- ``shared_gpt`` (family ``shared``): one standard (sequential) GPT-2 block reused at each of the ``num_layers``
  layers, x_l = Block(x_{l-1}), l = 1..L, with Levanter's Gpt2Block;
- ``shared_ode_gpt`` (family ``shared_ode``): DiffEqFormer's vector field with time-independent weights, solved by
  the same Euler steps, x_l = x_{l-1} + dt·(Attn(LN1 x_{l-1}) + FF(LN2 x_{l-1})), dt = 1/L (Eqs. 2-5 with one
  set of weights for every t), with DiffEqFormer's ParallelGptBlock.

Both use Levanter's Gpt2Embeddings and the tied unembedding.
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

from .diffeq_gpt import ParallelGptBlock
from .gpt2_dimensions import Gpt2Dimensions
from .heads import GptHeadModel


@LmConfig.register_subclass("shared_gpt")
@dataclass(frozen=True)
class SharedGptConfig(Gpt2Dimensions, LmConfig["SharedGptLMHeadModel"]):
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


@LmConfig.register_subclass("shared_ode_gpt")
@dataclass(frozen=True)
class SharedOdeGptConfig(Gpt2Dimensions, LmConfig["SharedOdeGptLMHeadModel"]):
    """Gpt2Config's fields; ``num_layers`` is the number L of Euler steps of the shared field (dt = 1/L)."""

    @property
    def model_type(self) -> type["SharedOdeGptLMHeadModel"]:
        return SharedOdeGptLMHeadModel


class SharedOdeGptTransformer(eqx.Module):
    """x ↦ LN_f(Step^L(x)) with one ParallelGptBlock of step dt = 1/L, Step(x) = x + dt·(Attn(LN1 x) + FF(LN2 x));
    each application is rematerialised."""

    config: SharedOdeGptConfig = eqx.field(static=True)
    block: ParallelGptBlock
    ln_f: hnn.LayerNorm

    @staticmethod
    def init(config: SharedOdeGptConfig, *, key) -> "SharedOdeGptTransformer":
        block = ParallelGptBlock.init(config.gpt2(), key=key, step=1.0 / config.num_layers)
        ln_f = hnn.LayerNorm.init(config.Embed, eps=config.layer_norm_epsilon, use_bias=config.use_bias)
        return SharedOdeGptTransformer(config, block, ln_f)

    def __call__(self, x: NamedArray, attn_mask: AttentionMask | NamedArray, *, key=None) -> NamedArray:
        keys = maybe_rng_split(key, self.config.num_layers) if key is not None else None

        def euler_step(x, block, mask, key):
            return block(x, mask, key=key)

        policy = hax.ScanCheckpointPolicy.from_bool_or_str(self.config.gradient_checkpointing)
        fold = hax.fold(euler_step, self.config.Layers, remat=policy)
        return self.ln_f(fold(x, self.block, attn_mask, keys))


class SharedOdeGptLMHeadModel(GptHeadModel):
    """GPT-2 embeddings, the shared-field Euler solve, and the tied unembedding."""

    transformer: SharedOdeGptTransformer

    @classmethod
    def init(cls, Vocab: Axis, config: SharedOdeGptConfig, *, key) -> "SharedOdeGptLMHeadModel":
        k_t, k_embeddings = jrandom.split(key)
        embeddings = Gpt2Embeddings.init(Vocab, config.gpt2(), key=k_embeddings)
        return cls(SharedOdeGptTransformer.init(config, key=k_t), embeddings)
