"""The Snakemake workflow: lint-clean, and the paper preset's dry run lists every run and probe with GPUs."""

import ast
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


def shell_commands(rules: Path) -> dict[str, str]:
    """Every rule's ``shell:`` string (adjacent string literals joined), by rule name."""
    text = rules.read_text()
    blocks = re.findall(r"^rule (\w+):\n(?:(?!^rule ).*\n)*?    shell:\n((?:        .*\n?)+)", text, re.M)
    return {name: "".join(ast.literal_eval(line.strip()) for line in block.splitlines()) for name, block in blocks}


def test_every_value_reaching_a_shell_is_quoted():
    """Params, wildcards, inputs, outputs, logs and resources enter a shell command through ``:q`` only (a list is
    quoted element by element), so no config string can run as shell code."""
    rule_files = sorted((ROOT / "workflow" / "rules").glob("*.smk"))
    commands = {f"{path.name}:{name}": command for path in rule_files for name, command in shell_commands(path).items()}
    assert len(commands) == sum(path.read_text().count("\n    shell:\n") for path in rule_files)
    unquoted = {where: fields for where, command in commands.items()
                if (fields := [f for f in re.findall(r"(?<!{){([^{}]+)}(?!})", command) if not f.endswith(":q")])}
    assert not unquoted


def test_a_shell_injection_in_a_task_name_is_refused_before_anything_runs():
    result = snakemake("-n", "--config", 'downstream={tasks: ["tiny_choice;touch /tmp/x;#"]}')
    assert result.returncode != 0
    sentences = [line for line in (result.stdout + result.stderr).splitlines() if "downstream.tasks" in line]
    assert sentences == [f"{ROOT}/workflow/config/tiny.yaml (with --config overrides ['downstream']): "
                         "key 'downstream.tasks.0' must match '^[A-Za-z0-9][A-Za-z0-9_.-]*$' "
                         "(got 'tiny_choice;touch /tmp/x;#')."]
