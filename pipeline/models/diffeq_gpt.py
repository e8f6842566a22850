"""DiffEqFormer, GPT-2 flavour: a transformer as a non-autonomous neural ODE solved by Euler (paper §4).

x_k = x_{k-1} + dt·f(t_k, x_{k-1}), t_k = k/L, dt = 1/L, k = 1..L, with the parallel vector field
f(t, x) = Attn_t(LN1_t(x)) + FF_t(LN2_t(x)) (Eqs. 2-5) whose every weight is generated from t (Eq. 6)."""

from dataclasses import dataclass

import equinox as eqx
import haliax.nn as hnn
import jax.random as jrandom
from haliax import Axis, NamedArray
from haliax.jax_utils import maybe_rng_split
from levanter.layers.attention import AttentionMask
from levanter.models.gpt2 import Gpt2Attention, Gpt2Config, Gpt2Mlp
from levanter.models.lm_model import LmConfig
from levanter.utils.activation import ActivationFunctionEnum

from .gpt2_dimensions import Gpt2Dimensions
from .heads import EulerTransformer, GptHeadModel
from .time_embedding import EulerField, TimeMlp
from .time_layers import TimeLayerNorm, TimeLayers, TimeLinear, linears_at


@LmConfig.register_subclass("diffeq_gpt")
@dataclass(frozen=True)
class DiffEqGptConfig(Gpt2Dimensions, LmConfig["DiffEqGptLMHeadModel"]):
    """GPT-2-shaped DiffEqFormer: L = ``num_layers`` Euler steps, D = ``time_embed_dim``, S = ``sinusoidal_dim``;
    ``shared_time_mlp`` is App. D.2's one MLP for all weights; ``time_precision`` and ``time_grid`` as in
    ``time_embedding``. ``attn_pdrop`` is unused, as in Levanter's Gpt2Attention (docs/models.md#known-differences)."""

    time_embed_dim: int = 20
    sinusoidal_dim: int = 128
    shared_time_mlp: bool = False
    time_precision: str = "compute"
    time_grid: str = "reference"

    norm_shift = property(lambda self: self.use_bias)
    Heads = property(lambda self: Axis(name="heads", size=self.num_heads))
    Mlp = property(lambda self: Axis(name="mlp", size=self.hidden_dim * self.mlp_scale))
    HeadSize = property(lambda self: Axis(name="head_size", size=self.hidden_dim // self.num_heads))
    TimeEmbed = property(lambda self: Axis(name="time_embed", size=self.time_embed_dim))
    Sinusoidal = property(lambda self: Axis(name="sinusoidal", size=self.sinusoidal_dim))

    model_type = property(lambda self: DiffEqGptLMHeadModel)


class ParallelGptBlock(eqx.Module):
    """One step x ↦ x + step·(Drop(Attn(LN1 x)) + Drop(FF(LN2 x))): ``step`` is dt, or 1 with dt folded into the
    output projections, dt·(W h + b) = (dt·W) h + dt·b."""

    ln_1: hnn.LayerNorm
    attn: Gpt2Attention
    ln_2: hnn.LayerNorm
    mlp: Gpt2Mlp
    resid_dropout: hnn.Dropout
    step: float = eqx.field(static=True, default=1.0)

    @staticmethod
    def init(config: Gpt2Config, *, key, step: float = 1.0) -> "ParallelGptBlock":
        """Random init with Levanter's GPT-2 initialisers (a template for loading discretised checkpoints)."""
        k_attn, k_mlp = jrandom.split(key)
        ln_1 = hnn.LayerNorm.init(config.Embed, eps=config.layer_norm_epsilon, use_bias=config.use_bias)
        attn = Gpt2Attention.init(config, key=k_attn)
        ln_2 = hnn.LayerNorm.init(config.Embed, eps=config.layer_norm_epsilon, use_bias=config.use_bias)
        mlp = Gpt2Mlp.init(config.Embed, config.Mlp, config.activation_function, key=k_mlp, use_bias=config.use_bias)
        return ParallelGptBlock(ln_1, attn, ln_2, mlp, hnn.Dropout(pdrop=config.resid_pdrop), step)

    def increment(self, x: NamedArray, mask: AttentionMask | NamedArray | None, *, key=None) -> NamedArray:
        """step·(Drop(Attn(LN1 x)) + Drop(FF(LN2 x))): the residual update of this step."""
        k_attn, k_drop_attn, k_mlp, k_drop_mlp = maybe_rng_split(key, 4)
        attn_out = self.resid_dropout(self.attn(self.ln_1(x), mask, None, key=k_attn), key=k_drop_attn)
        mlp_out = self.resid_dropout(self.mlp(self.ln_2(x), key=k_mlp), key=k_drop_mlp)
        return (attn_out + mlp_out) * self.step

    def __call__(self, x: NamedArray, mask: AttentionMask | NamedArray | None, *, key=None) -> NamedArray:
        return x + self.increment(x, mask, key=key)


class TimeGptAttention(eqx.Module):
    """Attention with time-dependent QKV (together) and output projections (Eq. 4)."""

    config: Gpt2Config = eqx.field(static=True)
    c_attn: TimeLinear
    c_proj: TimeLinear

    def at(self, t, shared_mlp: TimeMlp | None, scale=1.0) -> Gpt2Attention:
        """Levanter's Gpt2Attention with W(t); the output projection is multiplied by ``scale``."""
        return Gpt2Attention(self.config, *linears_at(t, shared_mlp, scale, self.c_attn, self.c_proj), inference=False)


class TimeGptMlp(eqx.Module):
    """Feed-forward block with time-dependent weights (Eq. 5)."""

    c_fc: TimeLinear
    c_proj: TimeLinear
    activation_function: ActivationFunctionEnum = eqx.field(static=True)

    def at(self, t, shared_mlp: TimeMlp | None, scale=1.0) -> Gpt2Mlp:
        """Levanter's Gpt2Mlp with W(t); the output projection is multiplied by ``scale``."""
        return Gpt2Mlp(*linears_at(t, shared_mlp, scale, self.c_fc, self.c_proj), self.activation_function.to_fn())


class DiffEqGptField(EulerField):
    """The vector field f(t, x) = Attn_t(LN1_t(x)) + FF_t(LN2_t(x)) (Eqs. 2-5, Fig. 1a)."""

    config: DiffEqGptConfig = eqx.field(static=True)
    ln_1: TimeLayerNorm
    attn: TimeGptAttention
    ln_2: TimeLayerNorm
    mlp: TimeGptMlp
    resid_dropout: hnn.Dropout
    shared_mlp: TimeMlp | None

    Block = ParallelGptBlock
    layers = property(lambda self: (self.ln_1, self.attn, self.ln_2, self.mlp))
    block_option = property(lambda self: self.resid_dropout)

    @staticmethod
    def init(config: DiffEqGptConfig, *, key) -> "DiffEqGptField":
        keys = jrandom.split(key, 7)
        layers = TimeLayers.for_config(config, out_first=False, Norm=TimeLayerNorm, key=keys[6])
        linear, norm = layers.linear, layers.norm

        Qkv = Axis("qkv", 3)
        attn = TimeGptAttention(
            config.gpt2(),
            linear(config.Embed, (Qkv, config.Heads, config.HeadSize), keys[1]),
            linear((config.Heads, config.HeadSize), config.Embed, keys[2]),
        )
        mlp = TimeGptMlp(
            linear(config.Embed, config.Mlp, keys[4]),
            linear(config.Mlp, config.Embed, keys[5]),
            config.activation_function,
        )
        resid_dropout = hnn.Dropout(pdrop=config.resid_pdrop)
        return DiffEqGptField(config, norm(keys[0]), attn, norm(keys[3]), mlp, resid_dropout, layers.shared_mlp)


class DiffEqGptTransformer(EulerTransformer):
    """Euler solve of dx/dt = f(t, x) on (0, 1] with L steps (``EulerTransformer``), then a final LayerNorm."""

    config: DiffEqGptConfig = eqx.field(static=True)
    field: DiffEqGptField
    ln_f: hnn.LayerNorm

    final_norm = property(lambda self: self.ln_f)


class DiffEqGptLMHeadModel(GptHeadModel):
    """Learned token + position embeddings, the Euler-solved DiffEqFormer, and the tied unembedding."""

    transformer: DiffEqGptTransformer
