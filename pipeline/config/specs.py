"""Typed run specs: what one pretraining run or fine-tune needs, resolved from a preset (``grid`` builds them). Each
field's roles (``ROLES``) decide the fingerprint, plan key and model recipe key (``role_values``); a renamed field
keeps its first serialised key (``serialised_as``), so earlier runs' fingerprints stay the same."""

import dataclasses
import json
import typing
from typing import Any, Self

WEIGHTS = "weights"
"""Enters the run fingerprint: the field decides the weights a run trains, or names the run."""
PLAN = "plan"
"""Enters the fit table's plan key: the field decides the train step's memory."""
MODEL = "model"
"""Enters the model recipe key: the field decides the model ``ModelRecipe.build`` builds (its cost)."""
SCHEDULE = "schedule"
"""Decides when a run evaluates or checkpoints, nothing it computes."""
EXECUTION = "execution"
"""Decides how a step is split over the devices (micro-batches), not what it computes."""
ROLES = (WEIGHTS, PLAN, MODEL, SCHEDULE, EXECUTION)


def spec_field(*roles: str, serialised_as: str | None = None, default: Any = dataclasses.MISSING) -> Any:
    """A spec field with its ``roles`` (of ``ROLES``) and, for a field renamed in Python, the key it is serialised
    under (its first name)."""
    return dataclasses.field(default=default, metadata={"roles": frozenset(roles), "serialised_as": serialised_as})


def serialised_key(field: dataclasses.Field) -> str:
    return field.metadata["serialised_as"] or field.name


def role_values(spec: Any, role: str | None) -> Any:
    """The fields of ``spec`` that have ``role`` (None: every field), by serialised key; a nested spec with the role,
    by its own fields that have it (a value that is no spec: as it is)."""
    if not dataclasses.is_dataclass(spec):
        return spec
    return {
        serialised_key(field): role_values(getattr(spec, field.name), role)
        for field in dataclasses.fields(spec)
        if role is None or role in field.metadata["roles"]
    }


def to_dict(spec: Any) -> dict[str, Any]:
    """Every field of ``spec`` by serialised key (``from_dict`` reads it back)."""
    return role_values(spec, None)


def _from_dict(cls: type, raw: dict[str, Any]) -> Any:
    """``cls`` from its serialised dict, each nested spec from its own (an unknown key fails as ``cls(**raw)``
    would)."""
    names = {serialised_key(field): field.name for field in dataclasses.fields(cls)}
    types = typing.get_type_hints(cls)  # the classes, also where annotations are postponed strings
    nested = {name: kind for name, kind in types.items() if dataclasses.is_dataclass(kind)}
    values = {names.get(key, key): value for key, value in raw.items()}
    return cls(**values | {name: _from_dict(nested[name], values[name]) for name in nested.keys() & values})


@dataclasses.dataclass(frozen=True)
class TrainSpec:
    """Optimisation hyperparameters of one run (AdamW, warm-up then cosine decay to min_lr_ratio·lr); ``steps``
    counts optimizer updates."""

    batch_size: int = spec_field(WEIGHTS, PLAN)
    steps: int = spec_field(WEIGHTS)
    lr: float = spec_field(WEIGHTS)
    eval_every: int = spec_field(SCHEDULE)
    checkpoint_every: int = spec_field(SCHEDULE)
    eval_batches: int | None = spec_field(SCHEDULE)
    weight_decay: float = spec_field(WEIGHTS)
    beta1: float = spec_field(WEIGHTS)
    beta2: float = spec_field(WEIGHTS)
    epsilon: float = spec_field(WEIGHTS)
    warmup_fraction: float = spec_field(WEIGHTS)
    min_lr_ratio: float = spec_field(WEIGHTS)
    dropout: float = spec_field(WEIGHTS, PLAN, MODEL)
    mixed_precision: str = spec_field(WEIGHTS, PLAN)
    seed: int = spec_field(WEIGHTS)
    decay_mask: str = spec_field(WEIGHTS)
    keep_checkpoints_every: int | None = spec_field(SCHEDULE, default=None)
    micro_batch_size: int | None = spec_field(EXECUTION, default=None)
    """Examples per device per forward/backward (Levanter's ``per_device_parallelism``); the gradients of
    batch_size / (micro_batch_size × devices) micro-batches are accumulated (gradient accumulation only reorders
    float sums). None: the whole batch at once."""


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """Architecture of one run: family and dimensions; time-embedding sizes D and S for DiffEqFormer (§4); the
    ``fidelity`` choices that shape its weights (init; e(t) precision and Llama layer where the family has them)."""

    family: str = spec_field(WEIGHTS, PLAN, MODEL)
    hidden_dim: int = spec_field(WEIGHTS, PLAN, MODEL)
    num_heads: int = spec_field(WEIGHTS, PLAN, MODEL)
    num_layers: int = spec_field(WEIGHTS, PLAN, MODEL)
    seq_len: int = spec_field(WEIGHTS, PLAN, MODEL)
    intermediate_dim: int | None = spec_field(WEIGHTS, PLAN, MODEL, default=None)
    time_embed_dim: int | None = spec_field(WEIGHTS, PLAN, MODEL, default=None)
    sinusoidal_dim: int | None = spec_field(WEIGHTS, PLAN, MODEL, default=None)
    shared_time_mlp: bool | None = spec_field(WEIGHTS, PLAN, MODEL, default=None)
    init: str = spec_field(WEIGHTS, PLAN, MODEL, default="reference")
    time_precision: str | None = spec_field(WEIGHTS, PLAN, MODEL, default=None)
    time_grid: str | None = spec_field(WEIGHTS, PLAN, MODEL, default=None)
    llama_layer: str | None = spec_field(WEIGHTS, PLAN, MODEL, default=None)


@dataclasses.dataclass(frozen=True)
class JobSpec:
    """What a run's spec and a fine-tune's share: their id and preset, JSON of every field by serialised key (read
    back by ``from_json``), and the job cut to a few updates."""

    run_id: str = spec_field(WEIGHTS)
    preset: str = spec_field(WEIGHTS)

    def to_json(self) -> str:
        return json.dumps(to_dict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Self:
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, raw: dict) -> Self:
        return _from_dict(cls, raw)

    def bounded(self, updates: int, micro_batch: int) -> Self:
        """The job cut to ``updates`` updates with one evaluation and one checkpoint, both at the last, none kept
        besides; ``micro_batch`` examples per device per forward/backward (0: the whole batch)."""
        train = dataclasses.replace(
            self.train,
            steps=updates,
            eval_every=updates,
            checkpoint_every=updates,
            keep_checkpoints_every=None,
            micro_batch_size=micro_batch or None,
        )
        return dataclasses.replace(self, train=train)


@dataclasses.dataclass(frozen=True)
class RunSpec(JobSpec):
    """Everything one pretraining run needs, resolved from the preset."""

    group: str = spec_field(WEIGHTS)
    dataset: str = spec_field(WEIGHTS)
    size: str = spec_field(WEIGHTS)
    tokenizer: str = spec_field(WEIGHTS)
    role: str = spec_field(WEIGHTS)
    ablation: str | None = spec_field(WEIGHTS)
    model: ModelSpec = spec_field(WEIGHTS, MODEL)
    train: TrainSpec = spec_field(WEIGHTS, MODEL)


@dataclasses.dataclass(frozen=True)
class FinetuneSpec(JobSpec):
    """One step-resampling fine-tune (paper §6.2): source run of L = ``source_euler_steps`` Euler steps resampled to
    N' = ``euler_steps`` (``None``: a GPT keeps its depth), trained on the target by ``method`` lora (``lora_rank``,
    ``lora_init``, + embeddings if ``train_embeddings``) or full; ``resampling`` and ``eval_split`` are the
    ``fidelity`` keys. Euler steps are layers, not updates; serialised as ``source_steps`` and ``num_steps``."""

    source_run: str = spec_field(WEIGHTS)
    source_dataset: str = spec_field(WEIGHTS)
    target_dataset: str = spec_field(WEIGHTS)
    tokenizer: str = spec_field(WEIGHTS)
    family: str = spec_field(WEIGHTS)
    source_euler_steps: int = spec_field(WEIGHTS, PLAN, serialised_as="source_steps")
    euler_steps: int | None = spec_field(WEIGHTS, PLAN, MODEL, serialised_as="num_steps")
    method: str = spec_field(WEIGHTS, PLAN)
    lora_rank: int | None = spec_field(WEIGHTS, PLAN)
    lora_init: str | None = spec_field(WEIGHTS)
    train_embeddings: bool = spec_field(WEIGHTS, PLAN)
    resampling: str = spec_field(WEIGHTS)
    eval_split: str = spec_field(WEIGHTS)
    train: TrainSpec = spec_field(WEIGHTS)
