"""A training run's trackers: ``metrics.jsonl`` as a registered Levanter tracker (``jsonl``), composed through
Levanter's ``CompositeTracker`` with its TensorBoard and Weights & Biases trackers when the preset's ``tracker``
list names them.

``metrics.jsonl`` is the run's record that its summary and the report read: one JSON object per logged call,
``{"step": s, ...}`` holding the pipeline's metrics (``RECORD_FIELDS``) only. The other trackers get those and
everything Levanter logs itself (``train/loss``, ``throughput/*``, ``optim/*``). The list reaches a training job as
``PIPELINE_TRACKERS`` (set by the workflow from the preset, like ``xla_flags``): trackers observe a run, they do
not change its weights, so they are neither part of its fingerprint nor a rule param.
"""

from __future__ import annotations

import dataclasses
import json
import os
import typing
from pathlib import Path

from levanter.tracker import Tracker, TrackerConfig

from pipeline.commands import TRACKERS_ENV

RECORD_FIELDS = ("loss", "lr", "tokens_per_s", "step_s", "eval_loss", "eval_ppl", "micro_batch",
                 "gradient_accumulation", "throughput/loading_time")
"""What ``metrics.jsonl`` records: a training step's batch loss, learning rate, throughput and duration, and the
seconds it waited for its batch (Levanter's ``throughput/loading_time``, on a line of its own); an
evaluation's validation loss and perplexity; at the first update an attempt trains, how it splits each batch
(``pipeline.artifacts.resume_metrics`` states what ``step`` means)."""

TRACKERS = ("jsonl", "tensorboard", "wandb")


class MetricsJsonlTracker(Tracker):
    """Appends ``{"step": step, <RECORD_FIELDS present>}`` per ``log`` call carrying any of ``fields``; the file is
    opened at the first such call (after the loop has cut the log back to its resume step) and line-buffered, so a
    killed job loses at most its last, torn line. Hyperparameters, summaries and artifacts are the run folder's
    ``config.yaml`` and ``summary.json``, not this file's."""

    name = "jsonl"

    def __init__(self, path: Path, fields: typing.Sequence[str]):
        self.path = path
        self.fields = tuple(fields)
        self._stream: typing.TextIO | None = None

    def log(self, metrics: typing.Mapping[str, typing.Any], *, step: int | None, commit: bool | None = None):
        record = {key: value for key, value in metrics.items() if key in self.fields}
        if not record:
            return
        if self._stream is None:
            self._stream = self.path.open("a", buffering=1)
        self._stream.write(json.dumps({"step": step, **record}) + "\n")

    def log_hyperparameters(self, hparams: dict[str, typing.Any]):
        pass

    def log_summary(self, metrics: dict[str, typing.Any]):
        pass

    def log_artifact(self, artifact_path, *, name: str | None = None, type: str | None = None):
        pass

    def finish(self):
        if self._stream is not None:
            self._stream.close()
            self._stream = None


@TrackerConfig.register_subclass("jsonl")
@dataclasses.dataclass(frozen=True)
class MetricsJsonlConfig(TrackerConfig):
    path: str = "metrics.jsonl"
    fields: tuple[str, ...] = RECORD_FIELDS

    def init(self, run_id: str | None) -> MetricsJsonlTracker:
        return MetricsJsonlTracker(Path(self.path), self.fields)


def configured_trackers() -> list[str]:
    """The tracker names of ``PIPELINE_TRACKERS`` (comma-separated; default ``jsonl``), checked."""
    names = [name.strip() for name in os.environ.get(TRACKERS_ENV, "jsonl").split(",") if name.strip()]
    unknown = [name for name in names if name not in TRACKERS]
    if unknown or "jsonl" not in names:
        raise ValueError(f"{TRACKERS_ENV}={','.join(names)} (the preset's 'tracker' list): expected 'jsonl' and "
                         f"optionally {' and '.join(map(repr, TRACKERS[1:]))}, got {unknown or 'no jsonl'}.")
    return names


def tracker_configs(run_dir: Path, names: typing.Sequence[str]) -> tuple[TrackerConfig, ...]:
    """Levanter tracker configs writing under ``run_dir``: ``metrics.jsonl``; TensorBoard event files in
    ``tensorboard/<run id>/``; a W&B run (id = run id, project ``diffeqformer``) in ``wandb/``, offline unless
    ``WANDB_MODE`` says otherwise (``wandb sync`` uploads an offline run later)."""
    from levanter.tracker.tensorboard import TensorboardConfig
    from levanter.tracker.wandb import WandbConfig

    configs: list[TrackerConfig] = []
    for name in names:
        if name == "jsonl":
            configs.append(MetricsJsonlConfig(path=str(run_dir / "metrics.jsonl")))
        elif name == "tensorboard":
            configs.append(TensorboardConfig(logdir=str(run_dir / "tensorboard")))
        elif name == "wandb":
            os.environ["WANDB_DIR"] = str(run_dir)  # Levanter's WandbConfig has no dir; wandb reads WANDB_DIR
            configs.append(WandbConfig(project="diffeqformer", mode=os.environ.get("WANDB_MODE", "offline")))
    return tuple(configs)
