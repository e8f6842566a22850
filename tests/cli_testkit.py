"""``python -m pipeline <verb>`` in a subprocess, as the tests run a job's command (``from cli_testkit import
pipeline_verb``: tests/ is on the tests' import path, as for tests/models/models_testkit.py), the tiny ``pretrain``
job the training tests run that way, and the same job as a ``TrainJob`` the loop tests hand to ``train_run`` in
process."""

import contextlib
import dataclasses
import logging
import os
import subprocess
import sys
from pathlib import Path

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


def pipeline_verb(
    *args: str, cwd: Path = ROOT, env: dict[str, str] | None = None, timeout: int = 600
) -> subprocess.CompletedProcess:
    """``python -m pipeline <args>`` in ``cwd`` with this process's environment, Ray's token authentication off
    (``RAY_AUTH_MODE=disabled``) and ``env`` on top; its output captured as text, its exit status left to the
    caller."""
    return subprocess.run(
        [*PIPELINE, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "RAY_AUTH_MODE": "disabled", **(env or {})},
        timeout=timeout,
    )


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
    cache: Path | None = None,
    ray: tuple[str, ...] = ("--ray-num-cpus", "1"),
) -> list[str]:
    """The ``pretrain`` verb's arguments: ``spec`` into ``run_dir`` on the tiny data in ``data`` (or ``cache``), on
    ``ray`` (default: an embedded Ray of one CPU), then ``extra``."""
    return [
        "pretrain",
        "--spec",
        spec.to_json(),
        "--run-dir",
        str(run_dir),
        "--cache",
        str(cache or data / "caches" / "wt103-bpe"),
        "--tokenizer",
        str(data / "tokenizers" / "bpe"),
        *ray,
        *extra,
    ]
