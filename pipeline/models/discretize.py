"""Step resampling (paper §6.2, docs/paper.md#resampled-model): ``discretize(model, N')`` evaluates W(t_k),
t_k = k/N', once, giving N' parallel blocks x ↦ x + dt'·(Attn(LN1 x) + FF(LN2 x)), dt' = 1/N' (or folded into the
output projections): a vanilla transformer's cost. With N' = L it reproduces the continuous model."""

import dataclasses
from dataclasses import dataclass

import equinox as eqx
import haliax as hax
import haliax.nn as hnn
import jax
from haliax.jax_utils import shaped_rng_split
from levanter.lora import LowRankLinear
from levanter.models.gpt2 import Gpt2Config
from levanter.models.llama import LlamaConfig
from levanter.models.lm_model import LmConfig

from .diffeq_gpt import DiffEqGptConfig, DiffEqGptLMHeadModel, ParallelGptBlock
from .diffeq_llama import DiffEqLlamaConfig, DiffEqLlamaLMHeadModel, ParallelLlamaBlock
from .heads import FoldedTransformer, GptHeadModel, LlamaHeadModel
from .init import redrawn

GPT_LORA_TARGETS = ("c_attn", "c_proj", "c_fc")
"""Linear layers of a discretised GPT-style DiffEqFormer, as ``levanter.lora.LoraConfig.target_modules``."""
LLAMA_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""Linear layers of a discretised Llama-style DiffEqFormer, as ``LoraConfig.target_modules``."""


@dataclass(frozen=True)
class DiscreteConfig:
    """What both discretised configs share: a DiffEqFormer ``source`` (its type and default set by each) discretised
    with ``num_steps`` = N' Euler steps, ``step_scaling`` saying where dt' goes (``time_embedding.STEP_SCALINGS``);
    the source's axes with N' layers."""

    source: LmConfig | None = None
    num_steps: int = 12
    step_scaling: str = "output"

    block_step = property(lambda self: 1.0 / self.num_steps if self.step_scaling == "output" else 1.0)

    Pos = property(lambda self: self.source.Pos)
    KeyPos = property(lambda self: self.source.KeyPos)
    Embed = property(lambda self: self.source.Embed)
    Layers = property(lambda self: self.source.Layers.resize(self.num_steps))

    def flops_per_token(self, vocab_size: int) -> float:
        return dataclasses.replace(self.source, num_layers=self.num_steps).flops_per_token(vocab_size)

    def stacked_blocks(self, Block: type, levanter_config, key, **options) -> hnn.Stacked:
        """N' randomly initialised ``Block``s of ``levanter_config`` with step ``block_step`` (a template for loading
        a discretised checkpoint)."""
        stacked = hnn.Stacked.init(self.Layers, Block, gradient_checkpointing=levanter_config.gradient_checkpointing)
        return stacked(levanter_config, key=shaped_rng_split(key, self.num_steps), step=self.block_step, **options)


@LmConfig.register_subclass("discrete_diffeq_gpt")
@dataclass(frozen=True)
class DiscreteDiffEqGptConfig(DiscreteConfig, LmConfig["DiscreteDiffEqGptLMHeadModel"]):
    """A GPT-style DiffEqFormer (``source``) discretised (``DiscreteConfig``)."""

    source: DiffEqGptConfig = dataclasses.field(default_factory=DiffEqGptConfig)

    model_type = property(lambda self: DiscreteDiffEqGptLMHeadModel)

    def gpt2(self) -> Gpt2Config:
        """The source's Gpt2Config, unchanged (num_layers = L) so ``discretize``'s output and ``build``'s template
        have identical pytree structures; the depth N' is ``Layers``."""
        return self.source.gpt2()


@LmConfig.register_subclass("discrete_diffeq_llama")
@dataclass(frozen=True)
class DiscreteDiffEqLlamaConfig(DiscreteConfig, LmConfig["DiscreteDiffEqLlamaLMHeadModel"]):
    """A Llama-style DiffEqFormer (``source``) discretised (``DiscreteConfig``)."""

    source: DiffEqLlamaConfig = dataclasses.field(default_factory=DiffEqLlamaConfig)
    num_steps: int = 16

    model_type = property(lambda self: DiscreteDiffEqLlamaLMHeadModel)

    def llama(self) -> LlamaConfig:
        """The LlamaConfig of the discrete model: the source's dimensions with N' layers."""
        return dataclasses.replace(self.source.llama(), num_layers=self.num_steps)


class DiscreteGptTransformer(FoldedTransformer):
    """N' stacked parallel GPT blocks, then the source's final LayerNorm."""

    config: DiscreteDiffEqGptConfig = eqx.field(static=True)
    blocks: hnn.Stacked[ParallelGptBlock]
    ln_f: hnn.LayerNorm

    final_norm = property(lambda self: self.ln_f)

    @staticmethod
    def init(config: DiscreteDiffEqGptConfig, *, key) -> "DiscreteGptTransformer":
        blocks = config.stacked_blocks(ParallelGptBlock, config.gpt2(), key)
        return DiscreteGptTransformer(config, blocks, config.source.final_norm())


class DiscreteDiffEqGptLMHeadModel(GptHeadModel):
    """A discretised GPT-style DiffEqFormer: Gpt2Embeddings, N' parallel blocks, tied unembedding. ``init`` (Levanter's
    GPT-2 init) gives a template for loading a discretised checkpoint."""

    transformer: DiscreteGptTransformer


class DiscreteLlamaTransformer(FoldedTransformer):
    """N' stacked parallel Llama blocks, then the source's final RMSNorm."""

    config: DiscreteDiffEqLlamaConfig = eqx.field(static=True)
    blocks: hnn.Stacked[ParallelLlamaBlock]
    norm: hnn.RmsNorm

    final_norm = property(lambda self: self.norm)

    @staticmethod
    def init(config: DiscreteDiffEqLlamaConfig, *, key) -> "DiscreteLlamaTransformer":
        source = config.source
        blocks = config.stacked_blocks(
            ParallelLlamaBlock, config.llama(), key, chained_norms=source.chained_norms, norm_shift=source.norm_shift
        )
        return DiscreteLlamaTransformer(config, blocks, source.final_norm())


class DiscreteDiffEqLlamaLMHeadModel(LlamaHeadModel):
    """A discretised Llama-style DiffEqFormer: token embeddings, N' parallel blocks, unembedding. ``init`` (Levanter's
    Llama init) gives a template for loading a discretised checkpoint."""

    transformer: DiscreteLlamaTransformer


def discretize(
    model: DiffEqGptLMHeadModel | DiffEqLlamaLMHeadModel, num_steps: int, step_scaling: str = "output"
) -> DiscreteDiffEqGptLMHeadModel | DiscreteDiffEqLlamaLMHeadModel:
    """The discrete transformer of N' = ``num_steps`` layers W(t_k), dt' per ``step_scaling``
    (``fidelity.resampling``); embeddings, final norm and head are the continuous model's own (shared)."""
    if num_steps < 1:
        raise ValueError(f"num_steps must be a positive number of Euler steps, got {num_steps}.")
    if not isinstance(model, DiffEqGptLMHeadModel | DiffEqLlamaLMHeadModel):
        raise TypeError(f"discretize expects a DiffEqFormer LM (GPT or Llama), got {type(model).__name__}.")
    blocks = model.transformer.field.euler_blocks(num_steps, step_scaling)
    if isinstance(model, DiffEqGptLMHeadModel):
        config = DiscreteDiffEqGptConfig(source=model.config, num_steps=num_steps, step_scaling=step_scaling)
        transformer = DiscreteGptTransformer(config, blocks, model.transformer.ln_f)
        return DiscreteDiffEqGptLMHeadModel(transformer, model.embeddings)
    config = DiscreteDiffEqLlamaConfig(source=model.config, num_steps=num_steps, step_scaling=step_scaling)
    transformer = DiscreteLlamaTransformer(config, blocks, model.transformer.norm)
    return DiscreteDiffEqLlamaLMHeadModel(transformer, model.embeddings, model.lm_head)


LORA_INITS = ("reference", "levanter")
"""LoRA adapter init (preset key ``fidelity.lora_init``): ``reference``, A and B ~ 1e-6·N(0,1) (the authors' code,
docs/paper.md#lora), or ``levanter``, Levanter's A with B = 0 (Hu et al. 2021)."""
REFERENCE_LORA_STD = 1e-6


def init_lora(model, scheme: str, key):
    """Re-initialise every LoRA adapter of ``model`` by ``scheme`` (one of ``LORA_INITS``). Either way the adapted
    model starts at the base model: exactly with B = 0, within ~r·1e-12 per weight with the reference init."""
    if scheme not in LORA_INITS:
        raise ValueError(f"fidelity.lora_init must be one of {LORA_INITS}, got {scheme!r}.")
    is_adapter = lambda node: isinstance(node, LowRankLinear)  # noqa: E731
    nodes, treedef = jax.tree_util.tree_flatten(model, is_leaf=is_adapter)
    keys = jax.random.split(key, len(nodes))

    def reinit(node, k):
        if not is_adapter(node):
            return node
        k_a, k_b = jax.random.split(k)
        lora_A, lora_B = node.lora_A, node.lora_B
        if scheme == "reference":
            lora_A, lora_B = redrawn(lora_A, k_a, REFERENCE_LORA_STD), redrawn(lora_B, k_b, REFERENCE_LORA_STD)
        else:
            lora_B = dataclasses.replace(lora_B, weight=hax.zeros_like(lora_B.weight))
        return dataclasses.replace(node, lora_A=lora_A, lora_B=lora_B)

    return jax.tree_util.tree_unflatten(treedef, [reinit(node, k) for node, k in zip(nodes, keys, strict=True)])
