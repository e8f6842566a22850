"""Which parameters AdamW decays: a run's ``train.decay_mask`` (docs/paper.md#weight-decay,
docs/configuration.md#fidelity-choices).

- ``family`` (the authors' pretraining code): baselines and weight sharing decay attention/MLP matrices and
  embeddings; DiffEqFormer-GPT only the embeddings; DiffEqFormer-Llama every parameter. Resampled models decay as
  their source family; LoRA adapters follow the module they wrap.
- ``all``: every trained parameter (the authors' fine-tuning code, whose optimizer has no mask).
- ``levanter``: Levanter's default mask (every weight except norms, embeddings and biases).
"""

import dataclasses
import functools
import re

import optax
from levanter.optim import AdamConfig

from pipeline.train.schedule import WarmupCosineInState, scale_by_adam_in_state

DECAY_MASKS = ("family", "all", "levanter")
EMBEDDINGS = re.compile(r"(.*\.)?embeddings\.(token|position)_embeddings\.weight")
BASELINE_MATRICES = re.compile(r".*\.(attn|self_attn|mlp)\..*weight")
"""Attention and MLP weight matrices of the baselines (Levanter's module names; LoRA adapters under them too)."""


def decay_rule(model) -> str:
    """``embeddings`` (DiffEqFormer-GPT, resampled too), ``all`` (DiffEqFormer-Llama, resampled too) or
    ``baseline`` (everything else), from the model's class."""
    from pipeline.models import (
        DiffEqGptLMHeadModel,
        DiffEqLlamaLMHeadModel,
        DiscreteDiffEqGptLMHeadModel,
        DiscreteDiffEqLlamaLMHeadModel,
    )

    if isinstance(model, DiffEqGptLMHeadModel | DiscreteDiffEqGptLMHeadModel):
        return "embeddings"
    if isinstance(model, DiffEqLlamaLMHeadModel | DiscreteDiffEqLlamaLMHeadModel):
        return "all"
    return "baseline"


def is_decayed(rule: str, path: str) -> bool:
    """Whether the parameter at ``path`` (Levanter's dotted key path) is decayed under ``rule``."""
    if rule == "all" or EMBEDDINGS.fullmatch(path):
        return True
    return rule == "baseline" and BASELINE_MATRICES.fullmatch(path) is not None


def decay_mask(params, mask: str = "family"):
    """The mask ``mask`` (``family`` or ``all``) of ``params`` (a model, or the trainable part of one): a tree of
    bools."""
    import equinox as eqx
    import haliax
    import jax
    from levanter.utils.jax_utils import leaf_key_paths

    rule = "all" if mask == "all" else decay_rule(params)

    def is_leaf(node):
        return eqx.is_array(node) or haliax.is_named_array(node)

    paths = leaf_key_paths(params, is_leaf=is_leaf)
    return jax.tree_util.tree_map(
        lambda leaf, path: is_decayed(rule, path) if is_leaf(leaf) else leaf, params, paths, is_leaf=is_leaf
    )


@AdamConfig.register_subclass("adam_reference_decay")
@dataclasses.dataclass(frozen=True)
class MaskedAdamConfig(AdamConfig):
    """Levanter's AdamW whose weight-decay mask is ``decay_mask`` (one of ``DECAY_MASKS``) and whose learning-rate
    schedule (warm-up, cosine decay) and β1, β2, ε are optimizer state (``pipeline.train.schedule``)."""

    decay_mask: str = "family"

    def __post_init__(self):
        super().__post_init__()
        if self.decay_mask not in DECAY_MASKS:
            raise ValueError(f"train.decay_mask must be one of {DECAY_MASKS}, got {self.decay_mask!r}.")
        stages = (self.cycles, self.cycle_length, self.haps, self.decay, self.cooldown)
        if self.lr_schedule != "cosine" or stages != (None,) * len(stages):
            raise ValueError(
                f"MaskedAdamConfig: lr_schedule {self.lr_schedule!r} with cycles/cycle_length/haps/decay/cooldown "
                f"{stages}; the schedule in the optimizer state (pipeline.train.schedule) is one warm-up and one "
                f"cosine decay: use lr_schedule 'cosine' and leave the others None."
            )
        if not 0.0 <= self.warmup <= 1.0:
            raise ValueError(f"train.warmup_fraction must be between 0 and 1, got {self.warmup}.")

    def lr_scheduler(self, num_train_steps, override_lr=None):
        """The schedule as a ``StatefulSchedule`` whose numbers are optimizer state (Levanter's ``build`` calls
        this)."""
        warmup_steps = int(self.warmup * num_train_steps)
        learning_rate = self.learning_rate if override_lr is None else override_lr
        return WarmupCosineInState(learning_rate, warmup_steps, num_train_steps - warmup_steps, self.min_lr_ratio)

    def build(self, num_train_steps):
        """Levanter's AdamW, θ ← θ − η_t·(Adam(clip(g)) + λ·mask·θ), with ``scale_by_adam_in_state`` for optax's
        ``scale_by_adam``; η_t is the state's ``hyperparams["learning_rate"]``, as in Levanter."""

        def adamw(learning_rate):
            clipping = [optax.clip_by_global_norm(self.max_grad_norm)] if self.max_grad_norm else []
            adam = scale_by_adam_in_state(self.beta1, self.beta2, self.epsilon)
            mask = self.build_weight_decay_mask()
            decay = [optax.add_decayed_weights(self.weight_decay, mask)] if self.weight_decay > 0 else []
            return optax.chain(*clipping, adam, *decay, optax.scale(-learning_rate))

        return optax.inject_hyperparams(adamw)(learning_rate=self.lr_scheduler(num_train_steps))

    def build_weight_decay_mask(self):
        if self.decay_mask == "levanter":
            return super().build_weight_decay_mask()
        return functools.partial(decay_mask, mask=self.decay_mask)
