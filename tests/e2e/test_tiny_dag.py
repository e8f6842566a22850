"""The whole tiny DAG, end to end, through plain Snakemake (the same rules as the paper preset)."""

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from pipeline.config import load_preset, pretrain_runs

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "JAX_COMPILATION_CACHE_DIR": str(workdir / "jax-cache")}
    return subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "workflow" / "Snakefile"),
                           "--directory", str(workdir), "--profile", str(ROOT / "profiles" / "ci"), *args],
                          cwd=ROOT, capture_output=True, text=True, env=env, timeout=2400)


@pytest.fixture(scope="module")
def tiny_dag(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("tiny-dag")
    result = snakemake(workdir)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return workdir / "results" / "tiny"


def test_every_run_trains_and_learns(tiny_dag):
    runs = pretrain_runs(load_preset({"preset": "tiny"}))
    for run_id, spec in runs.items():
        folder = tiny_dag / "runs" / run_id
        summary = json.loads((folder / "summary.json").read_text())
        records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
        losses = [r["loss"] for r in records if "loss" in r]
        assert len(losses) == spec.train.steps, run_id
        first_eval = next(r["eval_ppl"] for r in records if "eval_ppl" in r)
        assert math.isfinite(summary["val_ppl"]) and losses[-1] < losses[0] - 1.0, run_id
        assert summary["val_ppl"] < first_eval / 2, run_id
        assert all(r["tokens_per_s"] > 0 and r["lr"] > 0 for r in records if "loss" in r)
        assert yaml_run_id(folder / "config.yaml") == run_id
        provenance = json.loads((folder / "provenance.json").read_text())
        assert provenance["packages"]["levanter"] == "1.2.dev1644" and provenance["devices"]
        assert (folder / "checkpoints").is_dir()


def yaml_run_id(path: Path) -> str:
    import yaml

    return yaml.safe_load(path.read_text())["run_id"]


def job_counts(output: str) -> dict[str, int]:
    """The 'Job stats' table Snakemake prints: rule name -> number of jobs (without the total)."""
    lines = output.split("Job stats:")[1].strip().splitlines()[2:]
    counts = {}
    for line in lines:
        fields = line.split()
        if len(fields) != 2 or not fields[1].isdigit():
            break
        counts[fields[0]] = int(fields[1])
    counts.pop("total", None)
    return counts


def test_perplexity_table_lists_all_rows_of_tables_1_and_2(tiny_dag):
    table = pd.read_csv(tiny_dag / "tables" / "perplexity.csv")
    assert len(table) == 14
    assert table["val_ppl"].notna().all()
    markdown = (tiny_dag / "tables" / "perplexity.md").read_text()
    assert len(re.findall(r"\| \d+\.\d\d \(\d+\.\d\dM\)", markdown)) == 14
    for label in ("GPT", "Shared parameter", "DiffEqFormer", "Llama", "DiffEqFormer (Llama)"):
        assert f"| {label} " in markdown


def test_rerunning_one_target_reruns_only_that_run(tiny_dag):
    workdir = tiny_dag.parents[1]
    assert "Nothing to be done" in snakemake(workdir, "-n").stdout
    target = "results/tiny/runs/owt-small-gpt/summary.json"
    (workdir / target).unlink()
    result = snakemake(workdir, target)
    assert result.returncode == 0, result.stderr[-3000:]
    assert job_counts(result.stdout + result.stderr) == {"pretrain": 1}
    summary = json.loads((workdir / target).read_text())
    assert summary["resumed_from_step"] == summary["steps"]
