"""Step resampling (paper §6.2, App. D.1 "Inference time"): DiffEqFormer → an ordinary discrete transformer.

``discretize(model, N')`` evaluates W(t_k) at t_k = k/N', k = 1..N', once, and folds dt' = 1/N' into the
output projections of both branches, giving N' parallel blocks x ↦ x + Attn(LN1 x) + FF(LN2 x) built from
Haliax/Levanter layers: its cost is a vanilla transformer's, and Levanter's LoRA and checkpointing apply to
it unchanged. With N' = L it reproduces the continuous model.
"""

import dataclasses
from dataclasses import dataclass

import equinox as eqx
import haliax as hax
import haliax.nn as hnn
import jax
import jax.random as jrandom
from haliax import Axis, NamedArray
from haliax.jax_utils import maybe_rng_split, shaped_rng_split
from levanter.layers.attention import AttentionMask
from levanter.lora import LowRankLinear
from levanter.models.gpt2 import Gpt2Config, Gpt2Embeddings
from levanter.models.llama import LlamaConfig
from levanter.models.lm_model import LmConfig

from .diffeq_gpt import DiffEqGptConfig, DiffEqGptLMHeadModel, ParallelGptBlock
from .diffeq_llama import DiffEqLlamaConfig, DiffEqLlamaLMHeadModel, ParallelLlamaBlock
from .heads import GptHeadModel, LlamaHeadModel

GPT_LORA_TARGETS = ("c_attn", "c_proj", "c_fc")
"""Linear layers of a discretised GPT-style DiffEqFormer, as ``levanter.lora.LoraConfig.target_modules``."""
LLAMA_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""Linear layers of a discretised Llama-style DiffEqFormer, as ``LoraConfig.target_modules``."""


@LmConfig.register_subclass("discrete_diffeq_gpt")
@dataclass(frozen=True)
class DiscreteDiffEqGptConfig(LmConfig["DiscreteDiffEqGptLMHeadModel"]):
    """A GPT-style DiffEqFormer (``source``) discretised with ``num_steps`` = N' Euler steps."""

    source: DiffEqGptConfig = dataclasses.field(default_factory=DiffEqGptConfig)
    num_steps: int = 12

    Pos = property(lambda self: self.source.Pos)
    KeyPos = property(lambda self: self.source.KeyPos)
    Embed = property(lambda self: self.source.Embed)
    Layers = property(lambda self: self.source.Layers.resize(self.num_steps))

    @property
    def model_type(self) -> type["DiscreteDiffEqGptLMHeadModel"]:
        return DiscreteDiffEqGptLMHeadModel

    def gpt2(self) -> Gpt2Config:
        """The source's Gpt2Config, which the reused per-layer Levanter modules keep as a static field.

        It is left unchanged (num_layers = L, unused by those modules) so that ``discretize``'s output and
        ``build``'s template have identical pytree structures; the depth N' is ``Layers``.
        """
        return self.source.gpt2()

    def flops_per_token(self, vocab_size: int) -> float:
        return dataclasses.replace(self.source, num_layers=self.num_steps).flops_per_token(vocab_size)


@LmConfig.register_subclass("discrete_diffeq_llama")
@dataclass(frozen=True)
class DiscreteDiffEqLlamaConfig(LmConfig["DiscreteDiffEqLlamaLMHeadModel"]):
    """A Llama-style DiffEqFormer (``source``) discretised with ``num_steps`` = N' Euler steps."""

    source: DiffEqLlamaConfig = dataclasses.field(default_factory=DiffEqLlamaConfig)
    num_steps: int = 16

    Pos = property(lambda self: self.source.Pos)
    KeyPos = property(lambda self: self.source.KeyPos)
    Embed = property(lambda self: self.source.Embed)
    Layers = property(lambda self: self.source.Layers.resize(self.num_steps))

    @property
    def model_type(self) -> type["DiscreteDiffEqLlamaLMHeadModel"]:
        return DiscreteDiffEqLlamaLMHeadModel

    def llama(self) -> LlamaConfig:
        """The LlamaConfig of the discrete model: the source's shape with N' layers."""
        return dataclasses.replace(self.source.llama(), num_layers=self.num_steps)

    def flops_per_token(self, vocab_size: int) -> float:
        return dataclasses.replace(self.source, num_layers=self.num_steps).flops_per_token(vocab_size)


class DiscreteGptTransformer(eqx.Module):
    """N' stacked parallel GPT blocks (dt' folded in), then the source's final LayerNorm."""

    config: DiscreteDiffEqGptConfig = eqx.field(static=True)
    blocks: hnn.Stacked[ParallelGptBlock]
    ln_f: hnn.LayerNorm

    @staticmethod
    def init(config: DiscreteDiffEqGptConfig, *, key) -> "DiscreteGptTransformer":
        gpt2 = config.gpt2()
        blocks = hnn.Stacked.init(
            config.Layers, ParallelGptBlock, gradient_checkpointing=gpt2.gradient_checkpointing
        )(gpt2, key=shaped_rng_split(key, config.num_steps))
        ln_f = hnn.LayerNorm.init(config.Embed, eps=gpt2.layer_norm_epsilon, use_bias=gpt2.use_bias)
        return DiscreteGptTransformer(config, blocks, ln_f)

    def __call__(self, x: NamedArray, attn_mask: AttentionMask | NamedArray, *, key=None) -> NamedArray:
        keys = maybe_rng_split(key, self.config.num_steps) if key is not None else None
        return self.ln_f(self.blocks.fold(x, attn_mask, key=keys))


class DiscreteDiffEqGptLMHeadModel(GptHeadModel):
    """A discretised GPT-style DiffEqFormer: Gpt2Embeddings, N' parallel blocks, tied unembedding."""

    transformer: DiscreteGptTransformer

    @classmethod
    def init(cls, Vocab: Axis, config: DiscreteDiffEqGptConfig, *, key) -> "DiscreteDiffEqGptLMHeadModel":
        """Randomly initialised (Levanter's GPT-2 init): a template for loading a discretised checkpoint."""
        k_t, k_embeddings = jrandom.split(key)
        embeddings = Gpt2Embeddings.init(Vocab, config.gpt2(), key=k_embeddings)
        return cls(DiscreteGptTransformer.init(config, key=k_t), embeddings)


class DiscreteLlamaTransformer(eqx.Module):
    """N' stacked parallel Llama blocks (dt' folded in), then the source's final RMSNorm."""

    config: DiscreteDiffEqLlamaConfig = eqx.field(static=True)
    blocks: hnn.Stacked[ParallelLlamaBlock]
    norm: hnn.RmsNorm

    @staticmethod
    def init(config: DiscreteDiffEqLlamaConfig, *, key) -> "DiscreteLlamaTransformer":
        llama = config.llama()
        blocks = hnn.Stacked.init(
            config.Layers, ParallelLlamaBlock, gradient_checkpointing=llama.gradient_checkpointing
        )(llama, key=shaped_rng_split(key, config.num_steps))
        return DiscreteLlamaTransformer(config, blocks, llama.mk_LayerNorm(config.Embed))

    def __call__(
        self,
        x: NamedArray,
        attn_mask: AttentionMask | NamedArray,
        *,
        key=None,
        pos_ids: NamedArray | None = None,
    ) -> NamedArray:
        keys = maybe_rng_split(key, self.config.num_steps) if key is not None else None
        return self.norm(self.blocks.fold(x, attn_mask, key=keys, pos_ids=pos_ids))


class DiscreteDiffEqLlamaLMHeadModel(LlamaHeadModel):
    """A discretised Llama-style DiffEqFormer: token embeddings, N' parallel blocks, unembedding."""

    transformer: DiscreteLlamaTransformer

    @classmethod
    def init(cls, Vocab: Axis, config: DiscreteDiffEqLlamaConfig, *, key) -> "DiscreteDiffEqLlamaLMHeadModel":
        """Randomly initialised (Levanter's Llama init): a template for loading a discretised checkpoint."""
        k_t, k_head = jrandom.split(key)
        embeddings, lm_head = cls.init_head(Vocab, config.llama(), key=k_head)
        return cls(DiscreteLlamaTransformer.init(config, key=k_t), embeddings, lm_head)


def discretize(
    model: DiffEqGptLMHeadModel | DiffEqLlamaLMHeadModel, num_steps: int
) -> DiscreteDiffEqGptLMHeadModel | DiscreteDiffEqLlamaLMHeadModel:
    """The discrete transformer with N' = ``num_steps`` layers of weights W(t_k), t_k = k/N', dt' = 1/N'.

    Embeddings, final norm and head are the continuous model's own (shared, not copied).
    """
    if num_steps < 1:
        raise ValueError(f"num_steps must be a positive number of Euler steps, got {num_steps}.")
    if isinstance(model, DiffEqGptLMHeadModel):
        config = DiscreteDiffEqGptConfig(source=model.config, num_steps=num_steps)
        blocks = model.transformer.field.euler_blocks(num_steps)
        transformer = DiscreteGptTransformer(config, blocks, model.transformer.ln_f)
        return DiscreteDiffEqGptLMHeadModel(transformer, model.embeddings)
    if isinstance(model, DiffEqLlamaLMHeadModel):
        config = DiscreteDiffEqLlamaConfig(source=model.config, num_steps=num_steps)
        blocks = model.transformer.field.euler_blocks(num_steps)
        transformer = DiscreteLlamaTransformer(config, blocks, model.transformer.norm)
        return DiscreteDiffEqLlamaLMHeadModel(transformer, model.embeddings, model.lm_head)
    raise TypeError(f"discretize expects a DiffEqFormer LM (GPT or Llama), got {type(model).__name__}.")


def zero_lora_b(model):
    """Set every LoRA B matrix to zero, so each adapter's update B·A starts at 0 and the LoRA model's
    outputs equal the base model's (Hu et al. 2021); Levanter's ``loraize`` initialises B randomly."""

    def zero(node):
        if isinstance(node, LowRankLinear):
            lora_b = dataclasses.replace(node.lora_B, weight=hax.zeros_like(node.lora_B.weight))
            return dataclasses.replace(node, lora_B=lora_b)
        return node

    return jax.tree_util.tree_map(zero, model, is_leaf=lambda node: isinstance(node, LowRankLinear))
