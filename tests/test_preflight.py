"""The tiny preset's preflight (`snakemake preflight`, pipeline/preflight/): one job per training job shape, not per
run; a real job of one shape, sharded over 8 virtual CPU devices, fills every column of the report; and it leaves a
real run of its shape as it was."""

import csv
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.config import load_preset, pretrain_runs
from pipeline.preflight.report import COLUMNS
from pipeline.preflight.shapes import training_shapes
from pipeline.site import JobResources
from pipeline.train.identity import RunIdentity, stored_fingerprint

ROOT = Path(__file__).resolve().parent.parent
TINY = load_preset({"preset": "tiny"})
SHAPE, RUN = "gpt-small-g0-mb0", "wt103-small-gpt"
VIRTUAL_DEVICES = 8
pytestmark = pytest.mark.e2e


def snakemake(workdir: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "workflow" / "Snakefile"),
                           "--directory", str(workdir), "--profile", str(ROOT / "profiles" / "ci"), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})})


def test_the_tiny_preflight_runs_one_job_per_shape_not_per_run(tmp_path):
    result = snakemake(tmp_path, "-n", "preflight")
    assert result.returncode == 0, result.stderr[-2000:]
    shapes = training_shapes(TINY, JobResources(TINY, None))
    jobs = re.findall(r"wildcards: shape=(\S+)", result.stdout)
    assert sorted(jobs) == sorted(shapes) and len(jobs) < len(pretrain_runs(TINY)), jobs
    assert shapes[SHAPE].runs == (RUN, "owt-small-gpt")


@pytest.fixture(scope="module")
def preflight(tiny_data_workdir, tmp_path_factory):
    """A real run folder of ``RUN`` (its summary and checkpoint identity, as a finished run leaves them), then the
    preflight job of its shape on ``VIRTUAL_DEVICES`` virtual CPU devices and the report of that row (beside the
    shared data's working directory, which gets back only its data afterwards)."""
    results = tiny_data_workdir / "results" / "tiny"
    run_dir = results / "runs" / RUN
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "summary.json").write_text(json.dumps({"run_id": RUN, "fingerprint": "f" * 64}))
    (run_dir / "checkpoints" / "identity.json").write_text(json.dumps({"fingerprint": "f" * 64}))
    before = {path: path.read_bytes() for path in run_dir.rglob("*") if path.is_file()}
    row = results / "preflight" / SHAPE / "row.json"
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={VIRTUAL_DEVICES}"
    result = snakemake(tiny_data_workdir, str(row.relative_to(tiny_data_workdir)), env={"XLA_FLAGS": flags})
    assert result.returncode == 0, result.stderr[-3000:]
    shapes = json.dumps({SHAPE: {"runs": [RUN, "owt-small-gpt"], "gpus": 0}})
    reports = tmp_path_factory.mktemp("preflight-report")
    outputs = {name: reports / f"preflight.{name}" for name in ("md", "csv", "html", "projection")}
    report = subprocess.run([sys.executable, "-m", "pipeline", "preflight-report", "--preset", "tiny", "--rows",
                             str(row), "--shapes", shapes, "--device-label", "cpu",
                             *[arg for name, path in outputs.items() for arg in (f"--{name}", str(path))]],
                            cwd=tiny_data_workdir, capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr[-2000:]
    yield {"results": results, "run_dir": run_dir, "before": before, "outputs": outputs}
    shutil.rmtree(run_dir)
    shutil.rmtree(results / "preflight")


def test_a_preflight_job_fills_every_column_of_the_report(preflight):
    [row] = list(csv.DictReader(preflight["outputs"]["csv"].open()))
    assert list(row) == list(COLUMNS)
    assert row["status"] == "ok" and row["verdict"] == "ok" and row["error"] == "", row
    assert all(row[column] != "" for column in COLUMNS if column != "error"), row
    assert int(row["devices"]) == VIRTUAL_DEVICES and row["backend"] == "cpu"
    assert row["peak_source"].startswith("CPU peak measured in this job") and 0 < float(row["mfu"]) < 1
    assert float(row["median_step_s"]) > 0 and float(row["restore_s"]) > 0 and int(row["checkpoint_bytes"]) > 0
    assert SHAPE in preflight["outputs"]["md"].read_text() and "<table" in preflight["outputs"]["html"].read_text()
    projection = list(csv.DictReader(preflight["outputs"]["projection"].open()))
    assert {item["run_id"] for item in projection} == {RUN, "owt-small-gpt"}


def test_a_preflight_leaves_the_real_run_of_its_shape_unchanged_and_is_no_run(preflight):
    run_dir, results = preflight["run_dir"], preflight["results"]
    assert {path: path.read_bytes() for path in run_dir.rglob("*") if path.is_file()} == preflight["before"]
    assert not list((results / "preflight").rglob("summary.json"))
    data = results / "data"
    spec = pretrain_runs(TINY)[RUN]
    real = RunIdentity.of(dataclasses.asdict(spec), data / "tokenizers" / "bpe", data / "caches" / "wt103-bpe")
    preflight_fingerprint = stored_fingerprint(results / "preflight" / SHAPE / "train" / "checkpoints")
    assert preflight_fingerprint is not None and preflight_fingerprint != real.fingerprint
