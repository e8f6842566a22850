"""A pretraining job killed with SIGKILL mid-run and rerun continues from its last Levanter checkpoint and
ends with parameters equal, bit for bit, to those of an uninterrupted run (CPU, f32). The killed job is the
``pretrain`` verb's process; its rerun and the uninterrupted run are the verb's Ray task in this process."""

import os
import signal
import subprocess
import time
from pathlib import Path

import jax
import numpy as np
import pytest
from cli_testkit import PIPELINE, pretrain_args, tiny_spec

from pipeline.artifacts import read_metrics
from pipeline.train.runs import pretrain

pytestmark = pytest.mark.e2e


def final_parameters(run_dir: Path) -> list[np.ndarray]:
    from levanter.compat.hf_checkpoints import load_tokenizer

    from pipeline.models.checkpoint import load_run_model

    tokenizer = load_tokenizer(str(run_dir.parents[1] / "data" / "tokenizers" / "bpe"))
    _, model = load_run_model(run_dir, len(tokenizer))
    return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(model)]


def test_sigkilled_run_resumes_to_the_same_parameters(tiny_data):
    spec = tiny_spec(steps=40, checkpoint_every=10, eval_every=20)
    runs = tiny_data.parent / "resume-runs"
    killed = runs / "killed"
    job = subprocess.Popen(
        [*PIPELINE, *pretrain_args(spec, killed, tiny_data)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 300
    while not any((killed / "checkpoints").glob("step-10/metadata.json")) and time.time() < deadline:
        time.sleep(0.2)
    os.killpg(job.pid, signal.SIGKILL)
    job.wait()
    assert not (killed / "summary.json").exists()

    folders = str(tiny_data / "caches" / "wt103-bpe"), str(tiny_data / "tokenizers" / "bpe")
    resumed = pretrain(spec.to_json(), str(killed), *folders)
    assert 0 < resumed["resumed_from_step"] < spec.train.steps
    steps = [r["step"] for r in read_metrics(killed / "metrics.jsonl") if "loss" in r]
    assert steps == list(range(spec.train.steps))

    straight = pretrain(spec.to_json(), str(runs / "straight"), *folders)
    for a, b in zip(final_parameters(runs / "straight"), final_parameters(killed), strict=True):
        assert np.array_equal(a, b)
    assert resumed["val_loss"] == straight["val_loss"]
