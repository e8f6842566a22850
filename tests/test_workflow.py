"""The Snakemake workflow: lint-clean, and the paper preset's dry run lists every run and probe with GPUs."""

import os
import re
import subprocess
import sys
from pathlib import Path

from pipeline.config import finetune_runs, load_preset, memory_probes, pretrain_runs

ROOT = Path(__file__).resolve().parent.parent
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def snakemake(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*SNAKEMAKE, *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)


def test_snakemake_lint_is_clean():
    result = snakemake("--lint")
    assert "Congratulations, your workflow is in a good condition!" in result.stdout + result.stderr


def test_ruff_is_clean():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_slurm_profile_dry_run_lists_every_paper_run_with_its_gpus(tmp_path):
    result = snakemake("-n", "--profile", "profiles/slurm", "--printshellcmds")
    assert result.returncode == 0, result.stderr[-2000:]
    commands = [line for line in result.stdout.splitlines() if "python -m pipeline pretrain" in line]
    listed = {re.search(r"--run-dir results/paper/runs/(\S+)", line).group(1) for line in commands}
    assert listed == set(pretrain_runs(load_preset({"preset": "paper"})))
    assert all("--gpus 8" in line for line in commands)
    finetunes = [line for line in result.stdout.splitlines() if "python -m pipeline finetune" in line]
    listed = {re.search(r"--run-dir results/paper/runs/(\S+)", line).group(1) for line in finetunes}
    assert listed == set(finetune_runs(load_preset({"preset": "paper"})))
    assert all("--gpus 8" in line for line in finetunes)
    probes = [line for line in result.stdout.splitlines() if "python -m pipeline memory-probe" in line]
    assert len(probes) == len(memory_probes(load_preset({"preset": "paper"}))) == 7
    assert all("--gpus 8" in line and '"batch_size": 256' in line for line in probes)


def test_a_bad_config_override_stops_snakemake_with_one_sentence():
    result = snakemake("-n", "--config", "cache_builder=parallel")
    assert result.returncode != 0
    assert "key 'cache_builder' must be one of ['serial', 'ray'] (got 'parallel')" in result.stdout + result.stderr
