"""The distinct training job shapes of a preset: one preflight job stands for every run of its shape.

A shape is what decides a training job's speed and memory: model family × size × GPUs × micro-batch (the GPUs and
micro-batch the job sizing gives the run: ``pipeline.site.JobResources.training``). Its preflight trains the first
run of the shape (in the preset's order) for a bounded number of updates.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from pipeline.config import RunSpec, pretrain_runs

PREFLIGHT_RUNTIME_MIN = 20
"""Walltime of one preflight job: start-up (JAX compilation, the token cache) plus a few minutes of updates, an
evaluation, a checkpoint save and a restore."""


@dataclasses.dataclass(frozen=True)
class Shape:
    """One training job shape and the runs it stands for (``runs[0]`` is the one its preflight trains)."""

    family: str
    size: str
    gpus: int
    micro_batch: int
    runs: tuple[str, ...]

    @property
    def shape_id(self) -> str:
        return shape_id(self.family, self.size, self.gpus, self.micro_batch)

    @property
    def run_id(self) -> str:
        return self.runs[0]


def shape_id(family: str, size: str, gpus: int, micro_batch: int) -> str:
    """``<family>-<size>-g<GPUs>-mb<micro-batch>`` (micro-batch 0: the whole per-device batch at once)."""
    return f"{family}-{size}-g{gpus}-mb{micro_batch}"


def run_shape_id(spec: RunSpec, job: dict[str, Any]) -> str:
    """The shape of a pretraining run sized as ``job`` (``JobResources.training``: ``gpu``, ``micro_batch``)."""
    return shape_id(spec.model.family, spec.size, int(job["gpu"]), int(job["micro_batch"]))


def training_shapes(config: dict[str, Any], jobs) -> dict[str, Shape]:
    """Every pretraining run of ``config`` grouped by shape, sized by ``jobs`` (a ``JobResources``), by shape id."""
    grouped: dict[tuple[str, str, int, int], list[str]] = {}
    for run_id, spec in pretrain_runs(config).items():
        job = jobs.training("pretrain", run_id, check_preflight=False)
        key = (spec.model.family, spec.size, int(job["gpu"]), int(job["micro_batch"]))
        grouped.setdefault(key, []).append(run_id)
    shapes = [Shape(*key, runs=tuple(runs)) for key, runs in grouped.items()]
    return {shape.shape_id: shape for shape in shapes}


def gpu_hour_bound(shapes: dict[str, Shape], runtime_min: int = PREFLIGHT_RUNTIME_MIN) -> float:
    """The preflight's GPU-hours at most: every job's GPUs (at least one) × its walltime request."""
    return sum(max(shape.gpus, 1) for shape in shapes.values()) * runtime_min / 60


def job_list(shapes: dict[str, Shape], runtime_min: int = PREFLIGHT_RUNTIME_MIN) -> str:
    """A fixed-width table of the preflight's jobs: shape, GPUs, micro-batch, GPU-hours requested, runs covered."""
    header = f"{'shape':<36} {'GPUs':>4} {'micro':>5} {'GPU-h':>6}  runs"
    lines = [header, "-" * len(header)]
    for shape in shapes.values():
        hours = max(shape.gpus, 1) * runtime_min / 60
        lines.append(f"{shape.shape_id:<36} {shape.gpus:>4} {shape.micro_batch:>5} {hours:>6.2f}  "
                     f"{len(shape.runs)} ({', '.join(shape.runs)})")
    return "\n".join(lines)


def bound_share(bound_hours: float, grid_hours: float) -> float:
    """The preflight's GPU-hour bound as a share of the grid's (``nan`` for an empty grid)."""
    return bound_hours / grid_hours if grid_hours > 0 else math.nan
