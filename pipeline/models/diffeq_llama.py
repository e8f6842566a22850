"""DiffEqFormer, Llama flavour (paper App. C.6): RoPE, time-dependent RMSNorm, SwiGLU feed-forward.

x_k = x_{k-1} + dt·f(t_k, x_{k-1}), t_k = k/L, with the authors' chained norms (docs/paper.md#llama-layer)
f(t, x) = Attn_t(a) + SwiGLU_t(RMSNorm2_t(a)), a = RMSNorm1_t(x), or (``chained_norms`` off) the GPT-style
f(t, x) = Attn_t(RMSNorm1_t(x)) + SwiGLU_t(RMSNorm2_t(x))."""

import dataclasses
from dataclasses import dataclass

import equinox as eqx
import haliax.nn as hnn
import jax.random as jrandom
from haliax import Axis, NamedArray
from haliax.jax_utils import maybe_rng_split
from levanter.layers.attention import Attention, AttentionBackend, AttentionConfig, AttentionMask
from levanter.layers.rotary import DefaultRotaryEmbeddingsConfig, RotaryEmbeddingsConfig
from levanter.models.llama import LlamaConfig, LlamaMlp
from levanter.models.lm_model import LmConfig
from levanter.utils.activation import ActivationFunctionEnum

from .heads import EulerTransformer, LlamaHeadModel
from .time_embedding import EulerField, TimeMlp
from .time_layers import TimeLayers, TimeLinear, TimeRmsNorm, linears_at


@dataclass(frozen=True)
class LlamaDimensions:
    """The LlamaConfig fields of DiffEqFormer-Llama, with its defaults (the paper's Llama-1B); ``num_layers`` is L."""

    seq_len: int = 2048
    hidden_dim: int = 2048
    intermediate_dim: int = 8192
    num_layers: int = 16
    num_heads: int = 16
    num_kv_heads: int = 16
    activation_function: ActivationFunctionEnum = ActivationFunctionEnum.silu
    initializer_range: float = 0.02
    layer_norm_epsilon: float = 1e-6
    tie_word_embeddings: bool = False
    upcast_attn: bool = False
    attn_backend: AttentionBackend | None = None
    flash_attention_block_size: int | None = None
    gradient_checkpointing: bool | str = True
    use_bias: bool = False
    rope: RotaryEmbeddingsConfig = dataclasses.field(default_factory=DefaultRotaryEmbeddingsConfig)

    def llama(self) -> LlamaConfig:
        """The LlamaConfig of the same dimensions, for the reused Levanter modules (embeddings, attention, MLP)."""
        return LlamaConfig(**{field.name: getattr(self, field.name) for field in dataclasses.fields(LlamaDimensions)})

    def flops_per_token(self, vocab_size: int) -> float:
        """A Llama forward of L layers: weight generation is once per batch, not per token."""
        return self.llama().flops_per_token(vocab_size)


@LmConfig.register_subclass("diffeq_llama")
@dataclass(frozen=True)
class DiffEqLlamaConfig(LlamaDimensions, LmConfig["DiffEqLlamaLMHeadModel"]):
    """Llama-shaped DiffEqFormer (defaults: the paper's Llama-1B, D = 96, S = 256), L = ``num_layers`` Euler steps,
    untied embeddings. Layer defaults are the authors' (docs/paper.md#llama-layer): ``chained_norms``,
    ``norm_shift`` h(t)·F_b, eps 1e-6 in the layer and ``final_norm_epsilon`` 1e-5."""

    time_embed_dim: int = 96
    sinusoidal_dim: int = 256
    shared_time_mlp: bool = False
    time_precision: str = "compute"
    time_grid: str = "reference"
    final_norm_epsilon: float = 1e-5
    chained_norms: bool = True
    norm_shift: bool = True

    Pos = property(lambda self: Axis(name="position", size=self.seq_len))
    KeyPos = property(lambda self: self.Pos.alias("key_position"))
    Embed = property(lambda self: Axis(name="embed", size=self.hidden_dim))
    Layers = property(lambda self: Axis(name="layer", size=self.num_layers))
    Mlp = property(lambda self: Axis(name="mlp", size=self.intermediate_dim))
    TimeEmbed = property(lambda self: Axis(name="time_embed", size=self.time_embed_dim))
    Sinusoidal = property(lambda self: Axis(name="sinusoidal", size=self.sinusoidal_dim))
    model_type = property(lambda self: DiffEqLlamaLMHeadModel)

    def __post_init__(self):
        if self.num_heads % self.num_kv_heads != 0:
            raise ValueError(f"num_heads={self.num_heads} is not divisible by num_kv_heads={self.num_kv_heads}.")

    def final_norm(self) -> hnn.RmsNorm:
        """The final RMSNorm of the transformer, eps ``final_norm_epsilon``."""
        return dataclasses.replace(self.llama(), layer_norm_epsilon=self.final_norm_epsilon).mk_LayerNorm(self.Embed)


class ParallelLlamaBlock(eqx.Module):
    """One step x ↦ x + step·(Attn(a) + SwiGLU(RMSNorm2 b)), a = RMSNorm1 x, b = a (``chained_norms``) or x;
    ``step`` is dt, or 1 with dt folded into ``self_attn.o_proj`` and ``mlp.down_proj``."""

    attn_norm: hnn.RmsNorm
    self_attn: Attention
    mlp_norm: hnn.RmsNorm
    mlp: LlamaMlp
    chained_norms: bool = eqx.field(static=True, default=True)
    step: float = eqx.field(static=True, default=1.0)

    @staticmethod
    def init(config: LlamaConfig, *, key, chained_norms: bool, norm_shift: bool, step: float) -> "ParallelLlamaBlock":
        """Random init with Levanter's Llama initialisers (a template for loading discretised checkpoints)."""
        k_attn, k_mlp = jrandom.split(key)
        attn = Attention.init(config.attention_config(), key=k_attn)
        mlp = LlamaMlp.init(config.Embed, config.Mlp, config.activation_function, key=k_mlp, use_bias=config.use_bias)

        def norm():
            return hnn.RmsNorm.init(config.Embed, eps=config.layer_norm_epsilon, use_bias=norm_shift)

        return ParallelLlamaBlock(norm(), attn, norm(), mlp, chained_norms, step)

    def increment(
        self, x: NamedArray, mask: AttentionMask | NamedArray | None, *, key=None, pos_ids: NamedArray | None = None
    ) -> NamedArray:
        """step·(Attn(a) + SwiGLU(RMSNorm2 b)), a = RMSNorm1 x, b = a or x: the residual update of this step."""
        k_attn, k_mlp = maybe_rng_split(key, 2)
        attn_in = self.attn_norm(x)
        attn_out = self.self_attn(attn_in, mask, key=k_attn, pos_ids=pos_ids)
        mlp_out = self.mlp(self.mlp_norm(attn_in if self.chained_norms else x), key=k_mlp)
        return (attn_out + mlp_out) * self.step

    def __call__(
        self, x: NamedArray, mask: AttentionMask | NamedArray | None, *, key=None, pos_ids: NamedArray | None = None
    ) -> NamedArray:
        return x + self.increment(x, mask, key=key, pos_ids=pos_ids)


class TimeLlamaAttention(eqx.Module):
    """RoPE attention with time-dependent q, k, v and output projections."""

    config: AttentionConfig = eqx.field(static=True)
    q_proj: TimeLinear
    k_proj: TimeLinear
    v_proj: TimeLinear
    o_proj: TimeLinear

    def at(self, t, shared_mlp: TimeMlp | None, scale=1.0) -> Attention:
        """Levanter's Attention with W(t); the output projection is multiplied by ``scale``."""
        rot_embs = self.config.rope.build(self.config.HeadSize) if self.config.rope is not None else None
        linears = linears_at(t, shared_mlp, scale, self.q_proj, self.k_proj, self.v_proj, self.o_proj)
        return Attention(self.config, *linears, None, None, rot_embs)


class TimeLlamaMlp(eqx.Module):
    """SwiGLU feed-forward with three time-dependent linears: down(act(gate x) ⊙ up x)."""

    gate_proj: TimeLinear
    up_proj: TimeLinear
    down_proj: TimeLinear
    activation_function: ActivationFunctionEnum = eqx.field(static=True)

    def at(self, t, shared_mlp: TimeMlp | None, scale=1.0) -> LlamaMlp:
        """Levanter's LlamaMlp with W(t); the down projection is multiplied by ``scale``."""
        linears = linears_at(t, shared_mlp, scale, self.gate_proj, self.up_proj, self.down_proj)
        return LlamaMlp(*linears, self.activation_function.to_fn())


class DiffEqLlamaField(EulerField):
    """The vector field f(t, x) = Attn_t(a) + SwiGLU_t(RMSNorm2_t(a)), a = RMSNorm1_t(x) (chained norms), or
    Attn_t(RMSNorm1_t(x)) + SwiGLU_t(RMSNorm2_t(x))."""

    config: DiffEqLlamaConfig = eqx.field(static=True)
    attn_norm: TimeRmsNorm
    self_attn: TimeLlamaAttention
    mlp_norm: TimeRmsNorm
    mlp: TimeLlamaMlp
    shared_mlp: TimeMlp | None

    Block = ParallelLlamaBlock
    layers = property(lambda self: (self.attn_norm, self.self_attn, self.mlp_norm, self.mlp))
    block_option = property(lambda self: self.config.chained_norms)

    @staticmethod
    def init(config: DiffEqLlamaConfig, *, key) -> "DiffEqLlamaField":
        keys = jrandom.split(key, 10)
        layers = TimeLayers.for_config(config, out_first=True, Norm=TimeRmsNorm, key=keys[9])
        attn_config = config.llama().attention_config()
        linear, norm = layers.linear, layers.norm

        KVHeads, HeadSize = attn_config.KVHeads, attn_config.HeadSize
        attn = TimeLlamaAttention(
            attn_config,
            linear(config.Embed, (KVHeads, attn_config.QHeadsPerGroup, HeadSize), keys[1]),
            linear(config.Embed, (KVHeads, HeadSize), keys[2]),
            linear(config.Embed, (KVHeads, HeadSize), keys[3]),
            linear((attn_config.Heads, HeadSize), config.Embed, keys[4]),
        )
        mlp = TimeLlamaMlp(
            linear(config.Embed, config.Mlp, keys[6]),
            linear(config.Embed, config.Mlp, keys[7]),
            linear(config.Mlp, config.Embed, keys[8]),
            config.activation_function,
        )
        return DiffEqLlamaField(config, norm(keys[0]), attn, norm(keys[5]), mlp, layers.shared_mlp)


class DiffEqLlamaTransformer(EulerTransformer):
    """Euler solve of dx/dt = f(t, x) on (0, 1] with L steps (``EulerTransformer``), then a final RMSNorm."""

    config: DiffEqLlamaConfig = eqx.field(static=True)
    field: DiffEqLlamaField
    norm: hnn.RmsNorm

    final_norm = property(lambda self: self.norm)


class DiffEqLlamaLMHeadModel(LlamaHeadModel):
    """Token embeddings (no positions: RoPE), the Euler-solved DiffEqFormer, and the (untied) unembedding."""

    transformer: DiffEqLlamaTransformer
