"""Fit preview (pipeline.planning.fit): explicit sharding of every family at a paper shape, the micro-batch search, and
fine-tune and downstream rows planned on the tiny shapes."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
from types import SimpleNamespace

import pytest

from pipeline.config import load_preset
from pipeline.execution.errors import RunStopped
from pipeline.planning import fit
from pipeline.planning.grid import Grid, Pretraining
from pipeline.planning.measured import read_fit_rows

REPLICATED_BOUND_BYTES = 4 * 2**20
"""Parameters no mesh axis shards, per device: biases and the time-embedding MLPs' hidden layers (~2 MB at the
Llama width); anything a layer's width or depth scales (a weight matrix, the hypernetwork's projections) is
far above this."""
PAPER_GRID = Grid.load(load_preset({"preset": "paper"}))

LAYOUT_SCRIPT = """
import dataclasses, json, sys
import equinox as eqx, jax.random as jrandom
from haliax import Axis
from levanter.trainer import TrainerConfig
from pipeline.planning.xla_plans import replicated_parameters
from pipeline.config import RunSpec
from pipeline.models.checkpoint import run_model_config
from pipeline.train.step_plan import lay_out_abstract

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
    runs = PAPER_GRID.runs
    small = [
        runs[run_id]
        for run_id in ("wt103-small-gpt", "wt103-small-diffeq", "wt103-small-shared", "wt103-small-shared_ode")
    ]
    llama = [runs[run_id] for run_id in ("owt-llama1b-llama", "owt-llama1b-diffeq_llama")]
    return small + [dataclasses.replace(spec, model=dataclasses.replace(spec.model, num_layers=2)) for spec in llama]


def test_every_family_shards_its_parameters_over_eight_devices():
    specs = paper_shapes()
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    payload = json.dumps([json.loads(spec.to_json()) for spec in specs])
    finished = subprocess.run([sys.executable, "-c", LAYOUT_SCRIPT, payload], env=env, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr[-3000:]
    replicated = json.loads(finished.stdout.strip().splitlines()[-1])
    assert set(replicated) == {spec.run_id for spec in specs}
    for run_id, arrays in replicated.items():
        print(run_id, sum(arrays.values()), "bytes replicated per device:", arrays)
        assert sum(arrays.values()) <= REPLICATED_BOUND_BYTES, (run_id, arrays)


def fake_plan(per_example_bytes: int, fixed_bytes: int):
    """Plans whose temporaries grow linearly with the micro-batch (the shape of XLA's plans)."""
    calls, counts = [], {"parameters": 1, "trainable_parameters": 1, "replicated_param_bytes": 0, "optimizer_bytes": 0}

    def plan(temp: int) -> dict[str, int]:
        return counts | {"param_bytes": fixed_bytes, "temp_bytes": temp, "total_bytes": fixed_bytes + temp}

    def plans(requests, gpus, stop=None):
        calls.extend(micro_batch for _, micro_batch in requests)
        return [plan(per_example_bytes * micro_batch) for _, micro_batch in requests]

    return plans, calls


def medium_gpt() -> Pretraining:
    return PAPER_GRID.pretraining["owt-medium-gpt"]


@pytest.mark.parametrize(
    ("per_example", "fixed", "micro_batch", "fits"),
    [
        (10**9, 5 * 10**9, 32, "yes"),
        (2.1 * 10**9, 5 * 10**9, 16, "with accumulation"),
        (3 * 10**9, 5 * 10**9, 16, "with accumulation"),
        (9 * 10**9, 5 * 10**9, 4, "with accumulation"),
        (10**9, 90 * 10**9, 1, "no"),
    ],
)
def test_micro_batch_is_the_largest_divisor_that_fits(monkeypatch, tmp_path, per_example, fixed, micro_batch, fits):
    """Fits means within the 90 % of the GPU's 80 GB that a job's JAX reserves (72 GB): 32 × 2.1 GB + 5 GB = 72.2 GB
    and 8 × 9 GB + 5 GB = 77 GB would fit in 80 GB but not in what JAX takes; 90 GB fixed fits at no micro-batch."""
    workload = medium_gpt()  # batch 256 → 32 per device on 8
    plans, calls = fake_plan(per_example, fixed)
    monkeypatch.setattr(fit, "plans_in_subprocess", plans)
    [row] = fit.fit_rows([(workload, 8, 80 * 10**9)], tmp_path / "rows.jsonl", "key")
    assert (row.micro_batch, row.fits_at_paper_batch, row.fits) == (micro_batch, fits == "yes", fits != "no")
    assert row.accumulation * row.micro_batch * row.gpus == workload.batch_size
    assert calls[0] == 32 and len(calls) <= 3 + (fits == "no") and f"| {fits} |" in fit.fit_table([row])[0]


def test_with_a_site_each_job_is_planned_on_the_gpus_the_site_gives_it(monkeypatch, tmp_path):
    """``fit --site``: a pretraining run on the GPUs ``pipeline.planning.jobs`` sizes it to (1 for owt-small-gpt, 8 for
    the Llama DiffEqFormer), a memory probe on one node's (8), lm-eval on one, of the site's memory; each device count
    planned in its own process. The training job then reads its micro-batch from the table."""
    from pipeline.config.site import EXAMPLE, load_site
    from pipeline.planning.jobs import JobSizing

    site = load_site(EXAMPLE)
    jobs = JobSizing(PAPER_GRID, site)
    probe = "owt-medium-memory-gpt"
    expected = {
        "owt-small-gpt": jobs.gpu_count("owt-small-gpt"),
        "owt-llama1b-diffeq_llama": jobs.gpu_count("owt-llama1b-diffeq_llama"),
        probe: 8,
        "downstream-owt-large-gpt": 1,
    }
    assert (expected["owt-small-gpt"], expected["owt-llama1b-diffeq_llama"]) == (1, 8)
    processes = []

    def plans(requests, gpus, stop):
        processes.append((gpus, [workload.run_id for workload, _ in requests]))
        return fake_plan(10**9, 5 * 10**9)[0](requests, gpus)

    monkeypatch.setattr(fit, "plans_in_subprocess", plans)
    rows = fit.write_fit(PAPER_GRID, None, None, list(expected), tmp_path / "fit.md", tmp_path / "fit.csv", site)
    assert {row.run_id: row.gpus for row in rows} == expected
    assert {row.device_bytes for row in rows} == {80 * 10**9}
    first_plans = {gpus: set(ids) for gpus, ids in reversed(processes)}  # each device count's first process
    assert first_plans == {
        gpus: {run_id for run_id in expected if expected[run_id] == gpus} for gpus in expected.values()
    }
    assert all(expected[run_id] == gpus for gpus, ids in processes for run_id in ids)
    small = next(row for row in rows if row.run_id == "owt-small-gpt")
    assert (small.per_device_batch, small.micro_batch, small.fits_at_paper_batch) == (512, 64, False)
    planned = JobSizing(PAPER_GRID, site, fit_table=tmp_path / "fit.csv")
    assert planned.training("owt-small-gpt").micro_batch == 64


def test_planning_some_runs_merges_their_rows_into_the_table(monkeypatch, tmp_path):
    """``fit --runs a,b`` replaces the rows of those jobs and keeps every other row of the table (the whole table
    of the paper preset takes CPU-hours to plan); the markdown shows them all, each with its GPU's memory."""
    monkeypatch.setattr(fit, "plans_in_subprocess", fake_plan(10**9, 5 * 10**9)[0])
    md, table = tmp_path / "fit.md", tmp_path / "fit.csv"
    fit.write_fit(PAPER_GRID, "h100", 8, ["owt-small-gpt", "owt-medium-gpt"], md, table)
    fit.write_fit(PAPER_GRID, "h200", 8, ["owt-small-gpt"], md, table)
    monkeypatch.setattr(fit, "plans_in_subprocess", fake_plan(2 * 10**9, 5 * 10**9)[0])
    [replanned] = fit.write_fit(PAPER_GRID, "h100", 8, ["owt-medium-gpt"], md, table)
    rows = read_fit_rows(table)
    assert [(row.run_id, row.device_bytes) for row in rows] == [
        ("owt-small-gpt", 80 * 10**9),
        ("owt-small-gpt", 141 * 10**9),
        ("owt-medium-gpt", 80 * 10**9),
    ]
    assert rows[-1] == replanned and rows[-1].temp_bytes == 64 * 10**9
    assert [line.split(" | ")[4] for line in md.read_text().splitlines() if line.startswith("| owt-")] == [
        "80 (72)",
        "141 (127)",
        "80 (72)",
    ]
    fit.write_fit(PAPER_GRID, "h100", 8, None, md, table)
    assert len(read_fit_rows(table)) == len(PAPER_GRID.workloads), "without --runs: the whole table, new"


def test_the_fit_rules_parameter_changes_with_what_a_row_means_and_only_then():
    """``plans_digest`` (the ``fit`` rule's parameter: Snakemake plans again when it changes) follows the runs'
    shapes, GPUs and memory, not their learning rates or step counts."""
    from pipeline.config.site import EXAMPLE, load_site

    def digest(grid, *where):
        return fit.plans_digest(grid, fit.planned_jobs(grid, *where))

    paper = digest(PAPER_GRID, "h100", 8, None)
    retuned = load_preset({"preset": "paper", "pretrain": {"owt-small": {"train": {"lr": 1e-4, "steps": 1000}}}})
    reshaped = load_preset({"preset": "paper", "sizes": {"small": {"seq_len": 512}}})
    assert digest(Grid.load(retuned), "h100", 8, None) == paper
    assert digest(Grid.load(reshaped), "h100", 8, None) != paper
    elsewhere = [("h100", 4, None), ("h200", 8, None), (None, None, load_site(EXAMPLE))]
    assert len({paper, *(digest(PAPER_GRID, *where) for where in elsewhere)}) == 4


TINY_LORA, TINY_FULL, TINY_DOWNSTREAM = (
    "ft-wt103-owt-diffeq6-n8-lora",
    "ft-wt103-owt-diffeq6-n8-full",
    "downstream-owt-large-diffeq",
)


@pytest.fixture(scope="module")
def tiny_rows(tmp_path_factory):
    """A LoRA and a full fine-tune of the tiny DiffEqFormer resampled to N' = 8, and lm-eval on the tiny GPT-large
    DiffEqFormer, planned in one child process on 2 virtual devices (lm-eval plans on the first, as on its own one)
    and served from there to the fit, which asks for each at the vocabulary and micro-batch it was planned at."""
    config = load_preset({"preset": "tiny"})
    grid, out = Grid.load(config), tmp_path_factory.mktemp("fit")
    requests = [
        (workload, workload.batch_size // workload.devices(2))
        for workload in (grid.workloads[run_id] for run_id in (TINY_LORA, TINY_FULL, TINY_DOWNSTREAM))
    ]
    plans = zip(requests, fit.plans_in_subprocess(requests, 2, SimpleNamespace()), strict=True)
    planned = {(workload.run_id, *asked): plan for (workload, *asked), plan in plans}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fit, "plans_in_subprocess", lambda asked, *_: [planned[w.run_id, m] for w, m in asked])
        rows = fit.write_fit(grid, "h100", 2, [TINY_LORA, TINY_FULL, TINY_DOWNSTREAM], out / "fit.md", out / "fit.csv")
    return {row.run_id: row for row in rows}, (out / "fit.csv").read_text()


def test_a_finetune_and_a_downstream_run_are_planned_and_lora_plans_fewer_optimizer_bytes_than_full(tiny_rows):
    """LoRA's optimizer holds state for the adapters and embeddings only, though its model has more parameters (the
    frozen resampled weights + the adapters); lm-eval's forward pass holds no optimizer state."""
    rows, table = tiny_rows
    assert [(rows[run_id].role, rows[run_id].gpus) for run_id in (TINY_LORA, TINY_FULL, TINY_DOWNSTREAM)] == [
        ("finetune", 2),
        ("finetune", 2),
        ("downstream", 1),
    ]
    assert table.splitlines()[0].startswith("run_id,plan_key,role,")
    lora, full, downstream = rows[TINY_LORA], rows[TINY_FULL], rows[TINY_DOWNSTREAM]
    assert full.trainable_parameters == full.parameters > 0
    assert lora.parameters > full.parameters and lora.trainable_parameters < full.trainable_parameters
    assert 0 < lora.optimizer_bytes < full.optimizer_bytes
    assert (downstream.optimizer_bytes, downstream.trainable_parameters, downstream.batch_size) == (0, 0, 32)
    for row in (full, downstream):
        assert 0 < row.param_bytes < row.total_bytes and row.temp_bytes > 0


@pytest.mark.parametrize(("micro_batch", "expected"), [(None, -1), (4, 4)])
def test_a_runs_micro_batch_reaches_levanter(tmp_path, micro_batch, expected):
    """``train.micro_batch_size`` (the fit table's choice) is Levanter's ``per_device_parallelism``; the batch the
    paper reports stays ``train_batch_size``."""
    from pipeline.train.setup import trainer_config

    spec = PAPER_GRID.runs["owt-medium-gpt"]
    train = dataclasses.replace(spec.train, micro_batch_size=micro_batch)
    config = trainer_config(spec.run_id, train, tmp_path)
    assert (config.per_device_parallelism, config.train_batch_size) == (expected, spec.train.batch_size)


def stopped_fit(monkeypatch, tmp_path) -> tuple[Grid, list, int]:
    """A tiny fit on 2 GPUs (fake plans) stopped by a real SIGTERM while its 2-device first plans run, after its
    1-device lm-eval rows; the grid, the list the fake plans record each request in, and the rows kept."""
    grid, planned, stops = Grid.load(load_preset({"preset": "tiny"})), [], [signal.SIGTERM]

    def plans(requests, gpus, stop):
        planned.extend(workload.run_id for workload, _ in requests)
        if gpus == 2 and stops:
            os.kill(os.getpid(), stops.pop())
        return fake_plan(10**6, 10**6)[0](requests, gpus)

    monkeypatch.setattr(fit, "plans_in_subprocess", plans)
    with pytest.raises(RunStopped, match=r"fit: stopped on request \(SIGTERM: .*\) after \d+ of \d+ rows; they are"):
        fit.write_fit(grid, "h100", 2, None, tmp_path / "fit.md", tmp_path / "fit.csv")
    downstream = sum(workload.kind == "downstream" for workload in grid.workloads.values())
    assert fit.kept_row_count(tmp_path / "fit.csv") == downstream > 0 and not (tmp_path / "fit.csv").exists()
    return grid, planned, downstream


def test_a_stopped_fit_keeps_its_rows_and_the_rerun_plans_only_the_rest_into_the_same_table(monkeypatch, tmp_path):
    grid, planned, kept = stopped_fit(monkeypatch, tmp_path)
    fit.write_fit(grid, "h100", 2, None, tmp_path / "whole.md", tmp_path / "whole.csv")
    planned.clear()
    fit.write_fit(grid, "h100", 2, None, tmp_path / "fit.md", tmp_path / "fit.csv")
    assert len(planned) == len(grid.workloads) - kept and not fit.rows_file(tmp_path / "fit.csv").exists()
    assert (tmp_path / "fit.csv").read_text() == (tmp_path / "whole.csv").read_text()


def test_rows_kept_for_another_configuration_are_not_reused(monkeypatch, tmp_path):
    grid, planned, _ = stopped_fit(monkeypatch, tmp_path)
    planned.clear()
    rows = fit.write_fit(grid, "h200", 2, None, tmp_path / "fit.md", tmp_path / "fit.csv")
    assert len(planned) == len(rows) == len(grid.workloads) and {row.device_bytes for row in rows} == {141 * 10**9}


def test_a_fit_retried_after_a_real_failure_ends_at_once_repeating_its_sentence(monkeypatch, tmp_path, capsys):
    """Attempt 1's planning fails for real; attempt 2 plans nothing and repeats its sentence."""
    from pipeline.cli import main
    from pipeline.train.attempts import data_attempt_file

    def failing(requests, gpus, stop):
        raise RuntimeError("planning on 2 virtual devices failed: XlaRuntimeError: INTERNAL")

    monkeypatch.setattr(fit, "plans_in_subprocess", failing)
    table = tmp_path / "fit.csv"
    command = ["fit", "--preset", "tiny", "--device", "h100", "--gpus", "2", "--csv", str(table)]
    assert main([*command, "--md", str(tmp_path / "fit.md"), "--attempt", "1"]) == 1
    said = json.loads(data_attempt_file(table).read_text())["sentence"].removeprefix("error: ")
    capsys.readouterr()
    monkeypatch.setattr(fit, "plans_in_subprocess", fake_plan(10**6, 10**6)[0])
    assert main([*command, "--md", str(tmp_path / "fit.md"), "--attempt", "2"]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: `fit` for tiny, attempt 2: not run, as attempt 1 failed and only a stop by walltime or preemption "
        f"is retried (fix the cause, then run snakemake again); attempt 1 said: {said}"
    )
    assert "INTERNAL" in said and not table.exists()
