"""A training run's trackers (docs/runs.md#trackers): ``metrics.jsonl`` as a Levanter tracker (``jsonl``), holding
the pipeline's ``RECORD_FIELDS`` that summaries and the report read, composed with TensorBoard and W&B when the
preset's ``tracker`` list names them."""

import dataclasses
import json
import os
import typing
from pathlib import Path

from levanter.tracker import NoopTracker, TrackerConfig

from pipeline.execution.job_env import TRACKERS_ENV, WANDB_ENV
from pipeline.train.identity import RunIdentity

RECORD_FIELDS = (
    "loss",
    "lr",
    "tokens_per_s",
    "step_s",
    "eval_loss",
    "eval_ppl",
    "micro_batch",
    "gradient_accumulation",
    "throughput/loading_time",
)
"""What ``metrics.jsonl`` records: a training step's batch loss, learning rate, throughput and duration, and the
seconds it waited for its batch (Levanter's ``throughput/loading_time``, on a line of its own); an
evaluation's validation loss and perplexity; at the first update an attempt trains, how it splits each batch
(``pipeline.artifacts.resume_metrics`` states what ``step`` means)."""

TRACKERS = ("jsonl", "tensorboard", "wandb")
WANDB_DEFAULTS = {"project": "diffeqformer", "entity": None, "group": None, "tags": []}
"""The preset's ``wandb`` settings where it leaves them out (group None: the preset's name)."""


class MetricsJsonlTracker(NoopTracker):
    """Appends ``{"step": step, <RECORD_FIELDS present>}`` per ``log`` call carrying any of them; opened at the first
    such call (after the loop cut the log back to its resume step), line-buffered; hyperparameters, summaries and
    artifacts are left to the other trackers."""

    name = "jsonl"

    def __init__(self, path: Path):
        self.path = path
        self._stream: typing.TextIO | None = None

    def log(self, metrics: typing.Mapping[str, typing.Any], *, step: int | None, commit: bool | None = None):
        record = {key: value for key, value in metrics.items() if key in RECORD_FIELDS}
        if not record:
            return
        if self._stream is None:
            self._stream = self.path.open("a", buffering=1)
        self._stream.write(json.dumps({"step": step, **record}) + "\n")

    def finish(self):
        if self._stream is not None:
            self._stream.close()
            self._stream = None


@TrackerConfig.register_subclass("jsonl")
@dataclasses.dataclass(frozen=True)
class MetricsJsonlConfig(TrackerConfig):
    path: str = "metrics.jsonl"

    def init(self, run_id: str | None) -> MetricsJsonlTracker:
        return MetricsJsonlTracker(Path(self.path))


def configured_trackers() -> list[str]:
    """The tracker names of ``PIPELINE_TRACKERS`` (comma-separated; default ``jsonl``), checked."""
    names = [name.strip() for name in os.environ.get(TRACKERS_ENV, "jsonl").split(",") if name.strip()]
    unknown = [name for name in names if name not in TRACKERS]
    if unknown or "jsonl" not in names:
        raise ValueError(
            f"{TRACKERS_ENV}={','.join(names)} (the preset's 'tracker' list): expected 'jsonl' and "
            f"optionally {' and '.join(map(repr, TRACKERS[1:]))}, got {unknown or 'no jsonl'}."
        )
    return names


def wandb_config(preset: str, wandb_id: str):
    """Levanter's ``WandbConfig`` from ``PIPELINE_WANDB`` (project, entity, group, tags over ``WANDB_DEFAULTS``),
    offline unless ``WANDB_MODE`` says otherwise."""
    from levanter.tracker.wandb import WandbConfig

    settings = {**WANDB_DEFAULTS, **json.loads(os.environ.get(WANDB_ENV) or "{}")}
    return WandbConfig(
        project=settings["project"],
        entity=settings["entity"],
        group=settings["group"] or preset,
        tags=list(settings["tags"]),
        name=wandb_id,
        id=wandb_id,
        mode=os.environ.get("WANDB_MODE", "offline"),
    )


def tracker_configs(
    run_dir: Path, names: typing.Sequence[str], identity: RunIdentity | None
) -> tuple[TrackerConfig, ...]:
    """Levanter tracker configs under ``run_dir``: ``metrics.jsonl``; TensorBoard in ``tensorboard/<run id>/``; an
    offline W&B run in ``wandb/``, named and identified ``<preset>-<run id>-<first 8 hex digits of the
    fingerprint>``. Without an ``identity`` (probe, benchmark) ``metrics.jsonl`` only."""
    from levanter.tracker.tensorboard import TensorboardConfig

    configs: list[TrackerConfig] = []
    for name in names if identity is not None else ["jsonl"]:
        if name == "jsonl":
            configs.append(MetricsJsonlConfig(path=str(run_dir / "metrics.jsonl")))
        elif name == "tensorboard":
            configs.append(TensorboardConfig(logdir=str(run_dir / "tensorboard")))
        elif name == "wandb":
            preset, run_id = identity.parts["spec"]["preset"], identity.parts["spec"]["run_id"]
            os.environ["WANDB_DIR"] = str(run_dir)  # Levanter's WandbConfig has no dir; wandb reads WANDB_DIR
            configs.append(wandb_config(preset, f"{preset}-{run_id}-{identity.fingerprint[:8]}"))
    return tuple(configs)
