"""metrics.jsonl is a registered Levanter tracker, composed with TensorBoard and W&B (offline) when asked."""

import dataclasses
import json
import os
import subprocess

import draccus
import pytest
from cli_testkit import PIPELINE, ROOT, pretrain_args, tiny_spec
from levanter.tracker import TrackerConfig

from pipeline.artifacts import read_metrics, resume_metrics
from pipeline.config import load_preset, pretrain_runs
from pipeline.execution.job_env import export_trackers
from pipeline.train.identity import RunIdentity
from pipeline.train.tracking import MetricsJsonlConfig, configured_trackers, tracker_configs


def test_the_jsonl_tracker_records_the_run_metrics_and_a_resume_cuts_them_back(tmp_path):
    path = tmp_path / "metrics.jsonl"
    config = draccus.decode(TrackerConfig, {"type": "jsonl", "path": str(path)})
    assert config == MetricsJsonlConfig(path=str(path))
    tracker = config.init("run")
    tracker.log({"eval_loss": 2.0, "eval_ppl": 7.4}, step=0)
    for step in range(6):
        tracker.log({"loss": 1.0 / (step + 1), "lr": 0.1}, step=step)
        tracker.log({"train/loss": 1.0, "throughput/hook_time": 0.1}, step=step)  # Levanter's own: other trackers
        if step % 2:
            tracker.log({"eval_loss": 1.0 / (step + 1), "eval_ppl": 3.0}, step=step + 1)
    tracker.finish()
    assert read_metrics(path)[:2] == [
        {"step": 0, "eval_loss": 2.0, "eval_ppl": 7.4},
        {"step": 0, "loss": 1.0, "lr": 0.1},
    ]
    resume_metrics(path, 4)
    resumed = config.init("run")
    resumed.log({"loss": 0.5, "lr": 0.1}, step=4)
    resumed.finish()
    records = read_metrics(path)
    assert [r["step"] for r in records if "loss" in r] == [0, 1, 2, 3, 4]
    assert [r["step"] for r in records if "eval_loss" in r] == [0, 2, 4]


def test_a_tracker_list_without_jsonl_or_with_an_unknown_name_is_one_sentence(monkeypatch):
    monkeypatch.setenv("PIPELINE_TRACKERS", "jsonl,mlflow")
    with pytest.raises(ValueError) as error:
        configured_trackers()
    assert str(error.value) == (
        "PIPELINE_TRACKERS=jsonl,mlflow (the preset's 'tracker' list): expected 'jsonl' and "
        "optionally 'tensorboard' and 'wandb', got ['mlflow']."
    )
    monkeypatch.setenv("PIPELINE_TRACKERS", "wandb")
    with pytest.raises(ValueError, match="got no jsonl"):
        configured_trackers()
    monkeypatch.delenv("PIPELINE_TRACKERS")
    assert configured_trackers() == ["jsonl"]


def test_two_presets_runs_of_one_run_id_are_different_wandb_runs_with_the_presets_wandb_settings(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    for name in ("PIPELINE_TRACKERS", "PIPELINE_WANDB", "WANDB_DIR"):  # restored after the test
        monkeypatch.setenv(name, "")
    run_id, fingerprint = "wt103-small-gpt", "0123456789abcdef" * 4
    configs = {}
    for preset in ("tiny", "paper"):
        config = load_preset({"preset": preset})
        spec = pretrain_runs(config)[run_id]
        export_trackers(["jsonl", "wandb"], {**config["wandb"], "entity": "lab", "tags": ["repro"]})
        identity = RunIdentity(fingerprint, {"spec": dataclasses.asdict(spec)})
        configs[preset] = tracker_configs(tmp_path / preset, configured_trackers(), identity)[1]
    tiny, paper = configs["tiny"], configs["paper"]
    assert (tiny.id, tiny.name, paper.id) == (
        "tiny-wt103-small-gpt-01234567",
        "tiny-wt103-small-gpt-01234567",
        "paper-wt103-small-gpt-01234567",
    )
    assert (paper.project, paper.entity, paper.group, paper.tags, paper.mode) == (
        "diffeqformer",
        "lab",
        "paper",
        ["repro"],
        "offline",
    )


def test_a_run_with_tensorboard_and_offline_wandb_writes_all_three(tiny_data, tmp_path):
    """One tiny pretraining job with every tracker; W&B offline with an unreachable server (no network used)."""
    spec = tiny_spec(steps=4, eval_every=2, checkpoint_every=4, eval_batches=1)
    run_dir = tmp_path / spec.run_id
    env = {key: value for key, value in os.environ.items() if not key.startswith("WANDB_")}
    env.update(
        RAY_AUTH_MODE="disabled",
        PIPELINE_TRACKERS="jsonl,tensorboard,wandb",
        WANDB_MODE="offline",
        WANDB_BASE_URL="http://127.0.0.1:9",
    )
    result = subprocess.run(
        [*PIPELINE, *pretrain_args(spec, run_dir, tiny_data)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    records = read_metrics(run_dir / "metrics.jsonl")
    assert [(r["step"], sorted(r)) for r in records if "eval_loss" in r] == [
        (step, ["eval_loss", "eval_ppl", "step"]) for step in (0, 2, 4)
    ]
    assert [(r["step"], sorted(r)) for r in records if "eval_loss" not in r] == [
        (0, ["gradient_accumulation", "micro_batch", "step"])
    ] + [
        record
        for step in range(4)
        for record in (
            (step, ["loss", "lr", "step", "step_s", "tokens_per_s"]),
            (step, ["step", "throughput/loading_time"]),
        )
    ]
    events = b"".join(path.read_bytes() for path in (run_dir / "tensorboard" / spec.run_id).rglob("events.out.*"))
    assert all(tag in events for tag in (b"eval_ppl", b"tokens_per_s", b"train/loss"))
    wandb_logs = list((run_dir / "wandb").glob(f"offline-run-*-tiny-{spec.run_id}-*/run-tiny-{spec.run_id}-*.wandb"))
    assert len(wandb_logs) == 1 and b"eval_ppl" in wandb_logs[0].read_bytes()
    assert json.loads((run_dir / "summary.json").read_text())["steps_done"] == 4
