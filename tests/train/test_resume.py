"""A pretraining job killed with SIGKILL mid-run and rerun continues from its last Levanter checkpoint and
ends with parameters equal, bit for bit, to those of an uninterrupted run (CPU, f32)."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import jax
import numpy as np
import pytest
from cli_testkit import PIPELINE, pretrain_args, tiny_spec

pytestmark = pytest.mark.e2e


def final_parameters(run_dir: Path) -> list[np.ndarray]:
    from levanter.compat.hf_checkpoints import load_tokenizer

    from pipeline.models.checkpoint import load_run_model

    tokenizer = load_tokenizer(str(run_dir.parents[1] / "data" / "tokenizers" / "bpe"))
    _, model = load_run_model(run_dir, len(tokenizer))
    return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(model)]


def test_sigkilled_run_resumes_to_the_same_parameters(tiny_data_workdir):
    data_dir = tiny_data_workdir / "results" / "tiny" / "data"
    spec = tiny_spec(steps=120, checkpoint_every=20, eval_every=60)
    runs = data_dir.parent / "resume-runs"

    def pretrain_command(run_dir: Path) -> list[str]:
        return [*PIPELINE, *pretrain_args(spec, run_dir, data_dir)]

    straight = runs / "straight"
    subprocess.run(pretrain_command(straight), check=True, capture_output=True, timeout=600)

    killed = runs / "killed"
    job = subprocess.Popen(
        pretrain_command(killed),
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

    subprocess.run(pretrain_command(killed), check=True, capture_output=True, timeout=600)
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
