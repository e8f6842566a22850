"""``python -m pipeline <verb>`` in a subprocess, as the tests run a job's command (``from cli_testkit import
pipeline_verb``: tests/ is on the tests' import path, as for tests/models/models_testkit.py), the tiny ``pretrain``
job the training tests run that way, and the same job as a ``TrainJob`` the loop tests hand to ``train_run`` in
process."""

import contextlib
import dataclasses
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from pipeline.config import RunSpec, load_preset, pretrain_runs
from pipeline.train.loop import TrainJob

ROOT = Path(__file__).resolve().parent.parent
PIPELINE = [sys.executable, "-m", "pipeline"]
"""The command line of the pipeline's verbs, as a rule's shell runs them."""


def snakemake_in(workdir: Path) -> list[str]:
    """The command line of Snakemake on this repository's workflow in the working directory ``workdir``; the
    caller adds the profile, targets and options."""
    return [sys.executable, "-m", "snakemake", "-s", str(ROOT / "workflow" / "Snakefile"), "--directory", str(workdir)]


def venv_on_path() -> dict[str, str]:
    """This process's environment with the virtual environment's ``bin`` first on ``PATH``, where Snakemake's jobs
    find ``python`` and the tools."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def python_run(
    *args: str, cwd: Path = ROOT, env: dict[str, str] | None = None, timeout: int = 600
) -> subprocess.CompletedProcess:
    """``python <args>`` (this interpreter) in ``cwd`` with this process's environment, Ray's token authentication
    off (``RAY_AUTH_MODE=disabled``) and ``env`` on top; its output captured as text, its exit status left to the
    caller."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "RAY_AUTH_MODE": "disabled", **(env or {})},
        timeout=timeout,
    )


def pipeline_verb(*args: str, **options) -> subprocess.CompletedProcess:
    """``python -m pipeline <args>``, run as ``python_run`` runs it (``options``: its cwd, env and timeout)."""
    return python_run("-m", "pipeline", *args, **options)


def tiny_spec(**train) -> RunSpec:
    """The tiny preset's ``wt103-small-gpt`` with the ``train`` fields given."""
    base = pretrain_runs(load_preset({"preset": "tiny"}))["wt103-small-gpt"]
    return dataclasses.replace(base, train=dataclasses.replace(base.train, **train))


def tiny_job(data: Path, run_dir: Path, cache: Path | None = None, **train) -> TrainJob:
    """``tiny_spec(**train)`` into ``run_dir`` on the tiny data in ``data`` (or ``cache``), as a training job."""
    return TrainJob.pretraining(
        tiny_spec(**train), run_dir, cache or data / "caches" / "wt103-bpe", data / "tokenizers" / "bpe"
    )


@contextlib.contextmanager
def logged(name: str):
    """The messages logged to the logger ``name`` (and those below it) inside the block, as a list. The loop's
    ``levanter.initialize`` replaces the root logger's handlers, pytest's ``caplog`` among them."""
    messages: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    logging.getLogger(name).addHandler(handler)
    try:
        yield messages
    finally:
        logging.getLogger(name).removeHandler(handler)


def pretrain_args(
    spec: RunSpec,
    run_dir: Path,
    data: Path,
    *extra: str,
    ray: tuple[str, ...] = ("--ray-num-cpus", "1"),
) -> list[str]:
    """The ``pretrain`` verb's arguments: ``spec`` into ``run_dir`` on the tiny data in ``data``, on ``ray`` (default:
    an embedded Ray of one CPU), then ``extra``."""
    return [
        "pretrain",
        "--spec",
        spec.to_json(),
        "--run-dir",
        str(run_dir),
        "--cache",
        str(data / "caches" / "wt103-bpe"),
        "--tokenizer",
        str(data / "tokenizers" / "bpe"),
        *ray,
        *extra,
    ]


def trained_steps(run_dir: Path) -> int:
    """How many training updates ``run_dir``'s ``metrics.jsonl`` records so far (0 before it exists)."""
    metrics = run_dir / "metrics.jsonl"
    return sum('"loss"' in line for line in metrics.read_text().splitlines()) if metrics.exists() else 0


def snakemake_run(
    workdir: Path, *args: str, env: dict[str, str] | None = None, timeout: int = 600
) -> subprocess.CompletedProcess:
    """``snakemake <args>`` on this repository's workflow in ``workdir``, run from the repository root (where the
    profiles are) with ``venv_on_path()`` and ``env`` on top, its output captured as text, its exit status left to
    the caller."""
    return subprocess.run(
        [*snakemake_in(workdir), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**venv_on_path(), **(env or {})},
        timeout=timeout,
    )


def dry_run(workdir: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """``snakemake_run`` of ``<args> -n --printshellcmds`` with the repository on ``PYTHONPATH``."""
    return snakemake_run(workdir, *args, "-n", "--printshellcmds", env={"PYTHONPATH": str(ROOT)}, timeout=timeout)


def example_site(path: Path, drop: tuple[str, ...] = (), **changes) -> Path:
    """``profiles/slurm/site.example.yaml`` with the site keys ``changes`` and without those of ``drop``, written to
    ``path``."""
    raw = yaml.safe_load((ROOT / "profiles" / "slurm" / "site.example.yaml").read_text())
    raw["site"].update(changes)
    for key in drop:
        del raw["site"][key]
    path.write_text(yaml.safe_dump(raw))
    return path


CHECKPOINT_NOTE = "DAG of jobs will be updated after completion."
"""What a dry run prints after a checkpoint's shell command (``fit``), not part of it."""
DROPPED_JOB_FIELDS = ("jobid", "reason")
"""What a dry run's job block says that changes from run to run: Snakemake's job number and why it runs."""


def dry_run_jobs(output: str, workdir: Path) -> list[dict[str, object]]:
    """The jobs of a dry run's ``output``, sorted, each one record: rule, local or not, its fields (input, output,
    log, benchmark, wildcards; ``resources`` as a sorted mapping) and its shell command, without
    ``DROPPED_JOB_FIELDS`` and with ``workdir`` and the repository's path written as placeholders."""
    jobs: list[dict[str, object]] = []
    shell = False
    for line in output.replace(str(workdir), "<workdir>").replace(str(ROOT), "<repo>").splitlines():
        if match := re.match(r"^(local)?(?:rule|checkpoint) (\w+):$", line):
            jobs.append({"rule": match[2], "local": bool(match[1])})
            shell = False
        elif not jobs or not line.strip() or line.startswith("[") or line == CHECKPOINT_NOTE:
            shell = False
        elif line.startswith("Shell command: ") or shell:
            jobs[-1]["shell"] = (str(jobs[-1].get("shell", "")) + "\n" + line.removeprefix("Shell command: ")).strip()
            shell = True
        elif match := re.match(r"^    (\w+): (.*)$", line):
            if match[1] == "resources":
                jobs[-1]["resources"] = dict(sorted(item.split("=", 1) for item in match[2].split(", ")))
            elif match[1] not in DROPPED_JOB_FIELDS:
                jobs[-1][match[1]] = match[2]
    return sorted(jobs, key=lambda job: json.dumps(job, sort_keys=True))
