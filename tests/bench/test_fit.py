"""Fit preview (pipeline.bench.fit): explicit sharding of every family at a paper shape, and the micro-batch search."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from pipeline.bench import fit
from pipeline.config import load_preset, pretrain_runs

REPLICATED_BOUND_BYTES = 4 * 2**20
"""Parameters no mesh axis shards, per device: biases and the time-embedding MLPs' hidden layers (~2 MB at the
Llama width); anything a layer's width or depth scales (a weight matrix, the hypernetwork's projections) is
far above this."""

LAYOUT_SCRIPT = """
import dataclasses, json, sys
import equinox as eqx, jax.random as jrandom
from haliax import Axis
from levanter.trainer import TrainerConfig
from pipeline.bench.fit import replicated_parameters
from pipeline.config import RunSpec
from pipeline.models.checkpoint import run_model_config
from pipeline.step_plan import lay_out_abstract

config = TrainerConfig()
with config.device_mesh:
    result = {}
    for raw in json.loads(sys.argv[1]):
        spec = RunSpec.from_dict(raw)
        model = eqx.filter_eval_shape(run_model_config(spec).build, Axis("vocab", 50304), key=jrandom.PRNGKey(0))
        result[spec.run_id] = replicated_parameters(lay_out_abstract(model, config.parameter_axis_mapping))
print(json.dumps(result))
"""


def paper_shapes() -> list:
    """GPT-small, DiffEqFormer-small and both weight-sharing designs at the paper's small shape; Llama and
    DiffEqFormer-Llama at the paper's width with 2 layers (replication does not depend on depth: the layers are
    stacked arrays)."""
    runs = pretrain_runs(load_preset({"preset": "paper"}))
    small = [runs[run_id] for run_id in ("wt103-small-gpt", "wt103-small-diffeq", "wt103-small-shared",
                                         "wt103-small-shared_ode")]
    llama = [runs[run_id] for run_id in ("owt-llama1b-llama", "owt-llama1b-diffeq_llama")]
    return small + [dataclasses.replace(spec, model=dataclasses.replace(spec.model, num_layers=2)) for spec in llama]


def test_every_family_shards_its_parameters_over_eight_devices():
    specs = paper_shapes()
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    payload = json.dumps([json.loads(spec.to_json()) for spec in specs])
    finished = subprocess.run([sys.executable, "-c", LAYOUT_SCRIPT, payload], env=env, capture_output=True,
                              text=True)
    assert finished.returncode == 0, finished.stderr[-3000:]
    replicated = json.loads(finished.stdout.strip().splitlines()[-1])
    assert set(replicated) == {spec.run_id for spec in specs}
    for run_id, arrays in replicated.items():
        print(run_id, sum(arrays.values()), "bytes replicated per device:", arrays)
        assert sum(arrays.values()) <= REPLICATED_BOUND_BYTES, (run_id, arrays)


def fake_plan(per_example_bytes: int, fixed_bytes: int):
    """A plan whose temporaries grow linearly with the micro-batch (the shape of XLA's plans)."""
    calls = []

    def plan(spec, vocab_size, gpus, micro_batch):
        calls.append(micro_batch)
        temp = per_example_bytes * micro_batch
        return {"parameters": 1, "param_bytes": fixed_bytes, "replicated_param_bytes": 0, "optimizer_bytes": 0,
                "temp_bytes": temp, "total_bytes": fixed_bytes + temp, "gpus": gpus}

    return plan, calls


@pytest.mark.parametrize(("per_example", "expected_micro_batch", "fits_at_batch"),
                         [(10**9, 32, True), (3 * 10**9, 16, False), (9 * 10**9, 8, False)])
def test_micro_batch_is_the_largest_divisor_that_fits(monkeypatch, per_example, expected_micro_batch, fits_at_batch):
    spec = pretrain_runs(load_preset({"preset": "paper"}))["owt-medium-gpt"]  # batch 256 → 32 per device on 8
    plan, calls = fake_plan(per_example, 5 * 10**9)
    monkeypatch.setattr(fit, "_plan_in_subprocess", plan)
    row = fit.fit_run(spec, 50257, 8, 80 * 10**9)
    assert (row["micro_batch"], row["fits_at_paper_batch"], row["fits"]) == (expected_micro_batch, fits_at_batch, True)
    assert row["accumulation"] * row["micro_batch"] * row["gpus"] == spec.train.batch_size
    assert calls[0] == 32 and len(calls) <= 3


def test_a_run_that_fits_at_no_micro_batch_says_so(monkeypatch):
    spec = pretrain_runs(load_preset({"preset": "paper"}))["owt-medium-gpt"]
    plan, _ = fake_plan(10**9, 90 * 10**9)
    monkeypatch.setattr(fit, "_plan_in_subprocess", plan)
    row = fit.fit_run(spec, 50257, 8, 80 * 10**9)
    assert (row["micro_batch"], row["fits"]) == (1, False)
    assert "| no |" in fit.fit_table([row], "h100")[0]


@pytest.mark.parametrize(("micro_batch", "expected"), [(None, -1), (4, 4)])
def test_a_runs_micro_batch_reaches_levanter(tmp_path, micro_batch, expected):
    """``train.micro_batch_size`` (the fit table's choice) is Levanter's ``per_device_parallelism``; the batch the
    paper reports stays ``train_batch_size``."""
    from pipeline.train.loop import trainer_config

    spec = pretrain_runs(load_preset({"preset": "paper"}))["owt-medium-gpt"]
    train = dataclasses.replace(spec.train, micro_batch_size=micro_batch)
    config = trainer_config(spec.run_id, train, tmp_path)
    assert (config.per_device_parallelism, config.train_batch_size) == (expected, spec.train.batch_size)
