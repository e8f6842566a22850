"""Typed run specs: what one pretraining run or fine-tune needs, resolved from a preset (``grid`` builds them)."""

from __future__ import annotations

import dataclasses
import json


@dataclasses.dataclass(frozen=True)
class TrainSpec:
    """Optimisation hyperparameters of one run (AdamW, warm-up then cosine decay to min_lr_ratio·lr)."""

    batch_size: int
    steps: int
    lr: float
    eval_every: int
    checkpoint_every: int
    eval_batches: int | None
    weight_decay: float
    beta1: float
    beta2: float
    epsilon: float
    warmup_fraction: float
    min_lr_ratio: float
    dropout: float
    mixed_precision: str
    seed: int
    decay_mask: str
    keep_checkpoints_every: int | None = None
    micro_batch_size: int | None = None
    """Examples per device per forward/backward (Levanter's ``per_device_parallelism``); the gradients of
    batch_size / (micro_batch_size × devices) micro-batches are accumulated. None: the whole batch at once."""


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """Architecture of one run: family and dimensions; time-embedding sizes D and S for DiffEqFormer (§4); the
    ``fidelity`` choices that shape its weights (init; e(t) precision and Llama layer where the family has them)."""

    family: str
    hidden_dim: int
    num_heads: int
    num_layers: int
    seq_len: int
    intermediate_dim: int | None = None
    time_embed_dim: int | None = None
    sinusoidal_dim: int | None = None
    shared_time_mlp: bool | None = None
    init: str = "reference"
    time_precision: str | None = None
    time_grid: str | None = None
    llama_layer: str | None = None


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """Everything one pretraining run needs, resolved from the preset."""

    run_id: str
    preset: str
    group: str
    dataset: str
    size: str
    tokenizer: str
    role: str
    ablation: str | None
    model: ModelSpec
    train: TrainSpec

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, raw: dict) -> RunSpec:
        return cls(**{**raw, "model": ModelSpec(**raw["model"]), "train": TrainSpec(**raw["train"])})


@dataclasses.dataclass(frozen=True)
class FinetuneSpec:
    """One step-resampling fine-tune (paper §6.2): a pretrained source run, resampled to ``num_steps`` = N'
    Euler steps (DiffEqFormer; ``None`` keeps a GPT baseline's depth), trained on the target dataset with
    ``method`` lora (rank ``lora_rank``, adapters initialised by ``lora_init``, adapters + embeddings trainable if
    ``train_embeddings``) or full; ``resampling`` says where dt' goes (``fidelity.resampling``); ``eval_split`` is
    the target split it is scored on (``fidelity.eval_split``)."""

    run_id: str
    preset: str
    source_run: str
    source_dataset: str
    target_dataset: str
    tokenizer: str
    family: str
    source_steps: int
    num_steps: int | None
    method: str
    lora_rank: int | None
    lora_init: str | None
    train_embeddings: bool
    resampling: str
    eval_split: str
    train: TrainSpec

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> FinetuneSpec:
        raw = json.loads(text)
        return cls(**{**raw, "train": TrainSpec(**raw["train"])})
