"""The downstream rule: on the paper preset (SLURM profile), one lm-eval job per run of the pairs, with GPUs."""

import re
import subprocess
import sys
from pathlib import Path

from pipeline.config import load_preset

ROOT = Path(__file__).resolve().parents[2]


def test_slurm_dry_run_lists_every_paper_downstream_job_with_gpus_tasks_and_shots(tmp_path, paper_fit_table):
    downstream = load_preset({"preset": "paper"})["downstream"]
    runs = {run_id for pair in downstream["pairs"].values() for run_id in pair}
    targets = [f"results/paper/downstream/{run_id}/downstream.csv" for run_id in sorted(runs)]
    paper_fit_table(tmp_path, {})
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-n",
            "--profile",
            "profiles/slurm",
            "--snakefile",
            str(ROOT / "workflow" / "Snakefile"),
            "--directory",
            str(tmp_path),
            "--printshellcmds",
            *targets,
            "--config",
            "site=profiles/slurm/site.example.yaml",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    commands = [line for line in result.stdout.splitlines() if "python -m pipeline downstream" in line]
    assert {re.search(r"--run-dir results/paper/runs/(\S+)", line).group(1) for line in commands} == runs
    for line in commands:
        assert float(re.search(r"--gpus (\S+)", line).group(1)) >= 1
        assert f"--tasks {' '.join(downstream['tasks'])} --shots 0 5" in line
        assert "--task-dir" not in line and "--limit" not in line
