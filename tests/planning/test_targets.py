"""A table's target plans only the runs the table reads: the dry run of a table of the paper preset trains exactly
its runs (the list of every run, ``pretrain_runs.csv``, is its own rule)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.config import load_preset, pretrain_runs

ROOT = Path(__file__).resolve().parents[2]
RUNS = pretrain_runs(load_preset({"preset": "paper"}))
TABLE_RUNS = {run_id for run_id, spec in RUNS.items() if spec.role == "table"}


def planned_runs(workdir: Path, target: str) -> set[str]:
    """The pretraining runs the local dry run of ``target`` of the paper preset trains."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            target,
            "-n",
            "--snakefile",
            str(ROOT / "workflow" / "Snakefile"),
            "--directory",
            str(workdir),
            "--config",
            "preset=paper",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return set(re.findall(r"^rule pretrain:\n(?:    .*\n)*?    wildcards: run=(\S+)$", result.stdout, re.M))


@pytest.mark.parametrize(
    ("target", "runs"),
    [
        ("results/paper/tables/perplexity.md", TABLE_RUNS),
        ("results/paper/tables/model_specs.md", TABLE_RUNS),
        ("results/paper/tables/pretrain_runs.csv", set(RUNS)),
    ],
)
def test_a_table_target_plans_exactly_the_runs_it_reads(tmp_path, target, runs):
    assert len(TABLE_RUNS) == 16 < len(RUNS)
    assert planned_runs(tmp_path, target) == runs
