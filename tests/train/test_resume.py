"""A pretraining job killed with SIGKILL mid-run and rerun continues from its last Levanter checkpoint and
ends with parameters equal, bit for bit, to those of an uninterrupted run (CPU, f32)."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from pipeline.config import load_preset, pretrain_runs

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e


def pretrain_command(spec_json: str, run_dir: Path, data: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pipeline",
        "pretrain",
        "--spec",
        spec_json,
        "--run-dir",
        str(run_dir),
        "--cache",
        str(data / "caches" / "wt103-bpe"),
        "--tokenizer",
        str(data / "tokenizers" / "bpe"),
        "--ray-num-cpus",
        "1",
    ]


def final_parameters(run_dir: Path) -> list[np.ndarray]:
    from levanter.compat.hf_checkpoints import load_tokenizer

    from pipeline.models.checkpoint import load_run_model

    tokenizer = load_tokenizer(str(run_dir.parents[1] / "data" / "tokenizers" / "bpe"))
    _, model = load_run_model(run_dir, len(tokenizer))
    return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(model)]


def test_sigkilled_run_resumes_to_the_same_parameters(tiny_data_workdir):
    data_dir = tiny_data_workdir / "results" / "tiny" / "data"
    base = pretrain_runs(load_preset({"preset": "tiny"}))["wt103-small-gpt"]
    train = dataclasses.replace(base.train, steps=120, checkpoint_every=20, eval_every=60)
    spec = dataclasses.replace(base, train=train)
    runs = data_dir.parent / "resume-runs"

    straight = runs / "straight"
    subprocess.run(pretrain_command(spec.to_json(), straight, data_dir), check=True, capture_output=True, timeout=600)

    killed = runs / "killed"
    job = subprocess.Popen(
        pretrain_command(spec.to_json(), killed, data_dir),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 300
    while not any((killed / "checkpoints").glob("step-20/metadata.json")) and time.time() < deadline:
        time.sleep(0.2)
    os.killpg(job.pid, signal.SIGKILL)
    job.wait()
    assert not (killed / "summary.json").exists()

    subprocess.run(pretrain_command(spec.to_json(), killed, data_dir), check=True, capture_output=True, timeout=600)
    resumed = json.loads((killed / "summary.json").read_text())
    assert 0 < resumed["resumed_from_step"] < spec.train.steps
    steps = [
        json.loads(line)["step"]
        for line in (killed / "metrics.jsonl").read_text().splitlines()
        if "loss" in json.loads(line)
    ]
    assert steps == list(range(spec.train.steps))

    for a, b in zip(final_parameters(straight), final_parameters(killed), strict=True):
        assert np.array_equal(a, b)
    assert resumed["val_loss"] == json.loads((straight / "summary.json").read_text())["val_loss"]
