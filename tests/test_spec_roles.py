"""Field roles on the run specs (issue 37): every field says what it identifies, and the fingerprint, the plan key and
the recipe key are read from the roles; a renamed field keeps its first key, so old runs keep their fingerprints."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pipeline.config import FinetuneSpec, finetune_runs, load_preset, pretrain_runs
from pipeline.config.specs import PLAN, ROLES, ModelSpec, RunSpec, TrainSpec, role_values
from pipeline.train import identity

TRAIN = {
    "batch_size": 8,
    "steps": 40,
    "lr": 0.003,
    "eval_every": 20,
    "checkpoint_every": 20,
    "eval_batches": 2,
    "weight_decay": 0.1,
    "beta1": 0.9,
    "beta2": 0.95,
    "epsilon": 1e-8,
    "warmup_fraction": 0.1,
    "min_lr_ratio": 0.1,
    "dropout": 0.1,
    "mixed_precision": "p=f32,c=f32",
    "seed": 0,
    "decay_mask": "all",
    "keep_checkpoints_every": None,
    "micro_batch_size": None,
}
FINETUNE = {
    "run_id": "ft-owt-wt103-diffeq6-n3-lora",
    "preset": "tiny",
    "source_run": "owt-ft18-diffeq",
    "source_dataset": "owt",
    "target_dataset": "wt103",
    "tokenizer": "bpe",
    "family": "diffeq",
    "source_steps": 6,
    "num_steps": 3,
    "method": "lora",
    "lora_rank": 4,
    "lora_init": "reference",
    "train_embeddings": True,
    "resampling": "output",
    "eval_split": "test",
    "train": TRAIN,
}
"""A fine-tune's spec as the rules pass it (JSON keys of the code before Euler steps were renamed)."""
FINGERPRINTS = {
    "run": "f1cda2896f24e6b665152a48f910c7b399f1bff90f3ea71166730456e0132742",
    "preflight": "8e5d5af24971f767812624f73ffc6bc002824222156f4e3292f570ade1e3fdfa",
}
"""``FINETUNE``'s fingerprints (tokenizer and cache digests fixed, train step ``undonated-1``), computed by main
0ec7083 before field roles."""


def test_every_spec_field_says_which_roles_it_has():
    for spec_type in (RunSpec, ModelSpec, TrainSpec, FinetuneSpec):
        for field in dataclasses.fields(spec_type):
            roles = field.metadata.get("roles")
            assert roles and roles <= set(ROLES), (
                f"{spec_type.__name__}.{field.name}: declare its roles with spec_field(...) from {ROLES}"
            )


def test_a_fine_tune_keeps_its_fingerprint_and_its_json_through_the_euler_step_rename(monkeypatch):
    monkeypatch.setattr(identity, "tokenizer_digest", lambda path: "tokenizer")
    monkeypatch.setattr(identity, "cache_digest", lambda path: "cache")
    monkeypatch.setattr(identity, "TRAIN_STEP", "undonated-1")  # the train step's own version changed since
    spec = FinetuneSpec.from_dict(FINETUNE)
    assert (spec.source_euler_steps, spec.euler_steps) == (6, 3)
    assert FinetuneSpec.from_json(spec.to_json()) == spec
    assert '"num_steps": 3' in spec.to_json() and '"source_steps": 6' in spec.to_json()
    for preflight, expected in ((False, FINGERPRINTS["run"]), (True, FINGERPRINTS["preflight"])):
        run = identity.RunIdentity.of(spec, Path("t"), Path("c"), "source", preflight=preflight)
        assert run.fingerprint == expected


def test_the_plan_reads_the_plan_fields_of_the_model_the_train_step_and_the_fine_tune():
    config = load_preset({"preset": "tiny"})
    run = pretrain_runs(config)["wt103-small-gpt"]
    assert role_values(run.train, PLAN) == {
        "batch_size": run.train.batch_size,
        "dropout": run.train.dropout,
        "mixed_precision": run.train.mixed_precision,
    }
    assert role_values(run.model, PLAN) == dataclasses.asdict(run.model)
    finetune = FinetuneSpec.from_dict(FINETUNE)
    assert role_values(finetune, PLAN) == {
        "source_steps": 6,
        "num_steps": 3,
        "method": "lora",
        "lora_rank": 4,
        "train_embeddings": True,
    }


@pytest.mark.parametrize("micro_batch, expected", [(0, None), (4, 4)])
def test_a_spec_bounded_to_n_updates_evaluates_and_checkpoints_once_at_the_last(micro_batch, expected):
    config = load_preset({"preset": "tiny"})
    runs = pretrain_runs(config)
    for spec in (runs["wt103-small-gpt"], next(iter(finetune_runs(config, runs).values()))):
        bounded = spec.bounded(5, micro_batch)
        assert (bounded.train.steps, bounded.train.eval_every, bounded.train.checkpoint_every) == (5, 5, 5)
        assert bounded.train.keep_checkpoints_every is None and bounded.train.micro_batch_size == expected
        cut = ("steps", "eval_every", "checkpoint_every", "keep_checkpoints_every", "micro_batch_size")
        unchanged = dataclasses.replace(bounded.train, **{name: getattr(spec.train, name) for name in cut})
        assert dataclasses.replace(bounded, train=unchanged) == spec
