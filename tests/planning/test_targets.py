"""A table's target plans only the runs the table reads: the dry run of a table of the paper preset trains exactly
its runs (the list of every run, ``pretrain_runs.csv``, is its own rule)."""

from pathlib import Path

import pytest
from cli_testkit import dry_run, dry_run_jobs

from pipeline.config import load_preset, pretrain_runs

RUNS = pretrain_runs(load_preset({"preset": "paper"}))
TABLE_RUNS = {run_id for run_id, spec in RUNS.items() if spec.role == "table"}


def planned_runs(workdir: Path, target: str) -> set[str]:
    """The pretraining runs the local dry run of ``target`` of the paper preset trains."""
    result = dry_run(workdir, target, "--config", "preset=paper")
    assert result.returncode == 0, result.stderr[-2000:]
    jobs = dry_run_jobs(result.stdout, workdir)
    return {job["wildcards"].removeprefix("run=") for job in jobs if job["rule"] == "pretrain"}


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
