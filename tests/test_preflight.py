"""The tiny preset's preflight (`snakemake preflight`, pipeline/preflight/; its jobs, one per training job shape and
one per stage kind: tests/planning/test_grid.py): a real job of one shape, sharded over 8 virtual CPU devices, fills
every column of the report; and it leaves a real run of its shape as it was."""

import csv
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_testkit import ROOT, snakemake_in

from pipeline.cli import main
from pipeline.config import finetune_runs, load_preset, pretrain_runs
from pipeline.preflight.report import COLUMNS, NOT_APPLICABLE
from pipeline.train.identity import RunIdentity, stored_fingerprint

TINY = load_preset({"preset": "tiny"})
FINETUNE_SPECS = finetune_runs(TINY, pretrain_runs(TINY))
SHAPE, RUN = "gpt-small-g0-mb0", "wt103-small-gpt"
VIRTUAL_DEVICES = 8
pytestmark = pytest.mark.e2e


def snakemake(workdir: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    command = [*snakemake_in(workdir), "--profile", str(ROOT / "profiles" / "ci"), *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, **env})


STAGE_JOBS = {"finetune-full": "ft-wt103-owt-gpt8-full", "downstream": RUN, "spectra": RUN}
"""The stage jobs run on the checkpoint of this module's one preflight pretraining (``SHAPE``): those a GPT source
serves (Lyapunov and the frontier take a DiffEqFormer, whose preflight would add a pretraining job)."""


def stage_job(results: Path, kind: str, run_id: str, ray_address: str) -> Path:
    """``preflight-stage`` of ``kind`` on the preflight checkpoint of ``SHAPE``, as its rule calls it, on the Ray
    cluster at ``ray_address``; its row."""
    settings = (
        FINETUNE_SPECS[run_id].to_json()
        if kind.startswith("finetune-")
        else json.dumps(
            {
                **TINY["downstream"],
                "task_dir": str(ROOT / TINY["downstream"]["task_dir"]),
                "pair": "gpt-large",
                "prefetched": [],
            }
            if kind == "downstream"
            else TINY["analysis"][kind]
        )
    )
    row, data = results / "preflight" / "stages" / kind / "row.json", results / "data"
    job = ["--kind", kind, "--run-id", run_id, "--runs", "1", "--settings", settings, "--job-dir", str(row.parent)]
    source = ["--source-dir", str(results / "preflight" / SHAPE / "train")]
    inputs = ["--cache", str(data / "caches" / "wt103-bpe"), "--tokenizer", str(data / "tokenizers" / "bpe")]
    where = ["--device-label", "cpu", "--ray-address", ray_address, "--row", str(row)]
    assert main(["preflight-stage", *job, *source, *inputs, *where]) == 0
    return row


@pytest.fixture(scope="module")
def preflight(tiny_data_workdir, ray_head, tmp_path_factory):
    """A real run folder of ``RUN`` (its summary and checkpoint identity, as a finished run leaves them), then the
    preflight job of its shape on ``VIRTUAL_DEVICES`` virtual CPU devices, its stage jobs, all on one Ray cluster,
    and the report of their rows (beside the shared data's working directory, which gets back only its data
    afterwards)."""
    results = tiny_data_workdir / "results" / "tiny"
    run_dir = results / "runs" / RUN
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "summary.json").write_text(json.dumps({"run_id": RUN, "fingerprint": "f" * 64}))
    (run_dir / "checkpoints" / "identity.json").write_text(json.dumps({"fingerprint": "f" * 64}))
    before = {path: path.read_bytes() for path in run_dir.rglob("*") if path.is_file()}
    row = results / "preflight" / SHAPE / "row.json"
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={VIRTUAL_DEVICES}"
    target, ray = str(row.relative_to(tiny_data_workdir)), f"ray={{address: '{ray_head}'}}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_AUTH_MODE", "disabled")
        result = snakemake(tiny_data_workdir, target, "--config", ray, env={"XLA_FLAGS": flags})
        assert result.returncode == 0, result.stderr[-3000:]
        stage_rows = [stage_job(results, kind, run_id, ray_head) for kind, run_id in STAGE_JOBS.items()]
    shapes = json.dumps({SHAPE: {"runs": [RUN, "owt-small-gpt"], "gpus": 0}})
    reports = tmp_path_factory.mktemp("preflight-report")
    outputs = {name: reports / f"preflight.{name}" for name in ("md", "csv", "html", "projection")}
    report = ["preflight-report", "--preset", "tiny", "--rows", str(row), *map(str, stage_rows), "--shapes", shapes]
    outputs_args = [arg for name, path in outputs.items() for arg in (f"--{name}", str(path))]
    assert main([*report, "--device-label", "cpu", *outputs_args]) == 0
    yield {"results": results, "run_dir": run_dir, "before": before, "outputs": outputs}
    shutil.rmtree(run_dir)
    shutil.rmtree(results / "preflight")


def test_a_preflight_job_fills_every_column_of_the_report(preflight):
    row, *stages = list(csv.DictReader(preflight["outputs"]["csv"].open()))
    assert list(row) == list(COLUMNS)
    assert row["status"] == "ok" and row["verdict"] == "ok" and row["error"] == "", row
    assert all(row[column] != "" for column in COLUMNS if column != "error"), row
    assert int(row["devices"]) == VIRTUAL_DEVICES and row["backend"] == "cpu"
    assert row["peak_source"].startswith("CPU peak measured in this job") and 0 < float(row["mfu"]) < 1
    assert float(row["median_step_s"]) > 0 and float(row["restore_s"]) > 0 and int(row["checkpoint_bytes"]) > 0
    assert SHAPE in preflight["outputs"]["md"].read_text() and "<table" in preflight["outputs"]["html"].read_text()
    projection = list(csv.DictReader(preflight["outputs"]["projection"].open()))
    assert {item["run_id"] for item in projection} == {RUN, "owt-small-gpt"}


def test_the_stage_jobs_on_the_preflight_checkpoint_fill_their_rows_and_say_na(preflight):
    """A fine-tune, lm-eval and an analysis job each ran on the pretraining preflight's checkpoint: every column
    filled, "n/a" where it does not apply (said so in the report)."""
    _, *stages = list(csv.DictReader(preflight["outputs"]["csv"].open()))
    assert [row["kind"] for row in stages] == list(STAGE_JOBS)
    for row in stages:
        assert row["status"] == "ok" and row["verdict"] == "ok", row
        assert all(row[column] != "" for column in COLUMNS if column != "error"), row
        assert float(row["wall_s"]) > 0 and int(row["peak_memory_bytes"]) > 0 and row["backend"] == "cpu", row
        assert row["restore_s"] == NOT_APPLICABLE and row["budget_bytes"] == NOT_APPLICABLE, row
    finetune, downstream, spectra = stages
    assert float(finetune["median_step_s"]) > 0 and float(finetune["tokens_per_s"]) > 0, finetune
    assert downstream["median_step_s"] == spectra["mfu"] == NOT_APPLICABLE
    assert (preflight["results"] / "preflight" / "stages" / "spectra" / "spectra.csv").is_file()
    assert not list((preflight["results"] / "preflight").rglob("summary.json"))
    assert f"{NOT_APPLICABLE}: the column does not apply" in preflight["outputs"]["md"].read_text()


def test_a_preflight_leaves_the_real_run_of_its_shape_unchanged_and_is_no_run(preflight):
    run_dir, results = preflight["run_dir"], preflight["results"]
    assert {path: path.read_bytes() for path in run_dir.rglob("*") if path.is_file()} == preflight["before"]
    assert not list((results / "preflight").rglob("summary.json"))
    data = results / "data"
    spec = pretrain_runs(TINY)[RUN]
    real = RunIdentity.of(spec, data / "tokenizers" / "bpe", data / "caches" / "wt103-bpe")
    preflight_fingerprint = stored_fingerprint(results / "preflight" / SHAPE / "train" / "checkpoints")
    assert preflight_fingerprint is not None and preflight_fingerprint != real.fingerprint
