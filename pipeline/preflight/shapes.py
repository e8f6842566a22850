"""The distinct training job shapes of a preset: one preflight job stands for every run of its shape.

A shape is what decides a training job's speed and memory: model family × size × GPUs × micro-batch (the GPUs and
micro-batch the job sizing gives the run before any preflight measured it: ``JobSizing.before_preflight``, so the
shapes, and the row each run reads, stay the same after the preflight's throughput resizes the runs). Its preflight
trains the first run of the shape (in the preset's order) for a bounded number of updates.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from pipeline.planning.checkpoint_disk import CHECKPOINT_BYTES_PER_PARAMETER
from pipeline.planning.measured import shape_id
from pipeline.planning.placement import WalltimeError
from pipeline.preflight.stages import StageJob

PREFLIGHT_RUNTIME_MIN = 20
"""Walltime of a preflight stage job, and the least of a training shape's (whose own is estimated from its run:
``preflight_minutes``): start-up (JAX compilation, the token cache) plus a few
minutes of updates, an evaluation, a checkpoint save and a restore."""
PREFLIGHT_BASE_MIN = 15
"""Minutes of a preflight training job besides its updates and checkpoint I/O: two start-ups (the job and its
restart from the checkpoint: JAX compilation, opening the token cache) and two evaluations."""
CHECKPOINT_GB_PER_MIN = 30
"""Shared-filesystem bandwidth a preflight job's checkpoint save and restore are planned at (0.5 GB/s)."""
DEFAULT_WARMUP, DEFAULT_TIMED = 3, 20
"""Untimed (compilation) and timed updates of a preflight training job; the preset's ``preflight`` key sets them."""


@dataclasses.dataclass(frozen=True)
class Shape:
    """One training job shape and the runs it stands for (``runs[0]`` is the one its preflight trains)."""

    family: str
    size: str
    gpus: int
    micro_batch: int
    runs: tuple[str, ...]
    minutes: int = PREFLIGHT_RUNTIME_MIN

    @property
    def shape_id(self) -> str:
        return shape_id(self.family, self.size, self.gpus, self.micro_batch)

    @property
    def run_id(self) -> str:
        return self.runs[0]


def preflight_updates(config: dict[str, Any]) -> int:
    """Updates of one preflight training job: the preset's ``preflight.warmup`` + ``preflight.timed``."""
    settings = config.get("preflight", {})
    return settings.get("warmup", DEFAULT_WARMUP) + settings.get("timed", DEFAULT_TIMED)


def preflight_minutes(jobs, run_id: str, updates: int) -> int | None:
    """Walltime of the preflight job that trains ``updates`` updates of pretraining run ``run_id`` on the GPUs
    ``jobs`` (a ``JobSizing``) gives it: ``PREFLIGHT_BASE_MIN`` + the updates at the run's estimated seconds per
    update (GPU-hours × safety factor / GPUs / steps) + a save and a restore of one checkpoint at
    ``CHECKPOINT_GB_PER_MIN`` + the site's walltime warning lead, so that the warning comes after the work; None
    without GPUs to estimate it on. Longer than the GPU partition's limit: ``WalltimeError``."""
    site = jobs.site
    if site is None or site.gpus_per_node == 0:
        return None
    cost, gpus = jobs.cost(run_id), jobs.training_gpu_count(run_id)
    step_min = cost["gpu_hours"] * site.safety_factor / gpus / jobs.grid.workloads[run_id].train.steps * 60
    checkpoint_gb = cost["parameters"] * CHECKPOINT_BYTES_PER_PARAMETER / 1e9
    minutes = math.ceil(
        PREFLIGHT_BASE_MIN + updates * step_min + 2 * checkpoint_gb / CHECKPOINT_GB_PER_MIN + site.signal_lead_s / 60
    )
    limit = site.partition_limit_min(site.gpu_partition)
    if minutes > limit:
        raise WalltimeError(
            f"the preflight job of run {run_id} needs an estimated {minutes} min but partition "
            f"{site.gpu_partition!r} allows {limit} min; lower the preset's preflight.timed updates or raise "
            "max_runtime_min in the site file."
        )
    return minutes


def training_shapes(jobs) -> dict[str, Shape]:
    """Every pretraining run of the grid ``jobs`` (a ``JobSizing``) sizes, grouped by shape, by shape id; each shape's
    walltime that of its first run's preflight job, at least ``PREFLIGHT_RUNTIME_MIN`` (both as sized before the
    preflight: ``jobs.before_preflight``)."""
    jobs = jobs.before_preflight
    grouped: dict[tuple[str, str, int, int], list[str]] = {}
    for run_id, workload in jobs.grid.pretraining.items():
        job = jobs.training(run_id, check_preflight=False)
        key = (workload.run.model.family, workload.run.size, job.gpus, job.micro_batch or 0)
        grouped.setdefault(key, []).append(run_id)
    updates = preflight_updates(jobs.config)
    shapes = [
        Shape(
            *key,
            runs=tuple(runs),
            minutes=max(PREFLIGHT_RUNTIME_MIN, preflight_minutes(jobs, runs[0], updates) or 0),
        )
        for key, runs in grouped.items()
    ]
    return {shape.shape_id: shape for shape in shapes}


def run_shapes(shapes: dict[str, Shape]) -> dict[str, str]:
    """Each pretraining run's shape id."""
    return {run: shape_id for shape_id, shape in shapes.items() for run in shape.runs}


def gpu_hour_bound(jobs: list[tuple[int, int]]) -> float:
    """The preflight's GPU-hours at most: every job's GPUs (at least one) × its walltime request (``jobs``: GPUs and
    minutes of each)."""
    return sum(max(gpus, 1) * minutes for gpus, minutes in jobs) / 60


def job_list(shapes: dict[str, Shape], stages: dict[str, tuple[StageJob, int]]) -> str:
    """A fixed-width table of the preflight's jobs: shape (or stage kind), GPUs, micro-batch, walltime, GPU-hours
    requested, jobs of the grid covered; ``stages``: each stage job and its GPUs (``PREFLIGHT_RUNTIME_MIN`` each)."""
    header = f"{'shape':<36} {'GPUs':>4} {'micro':>5} {'min':>4} {'GPU-h':>6}  runs"
    lines = [header, "-" * len(header)]
    for shape in shapes.values():
        hours = max(shape.gpus, 1) * shape.minutes / 60
        lines.append(
            f"{shape.shape_id:<36} {shape.gpus:>4} {shape.micro_batch:>5} {shape.minutes:>4} {hours:>6.2f}  "
            f"{len(shape.runs)} ({', '.join(shape.runs)})"
        )
    for kind, (job, gpus) in stages.items():
        lines.append(
            f"{kind:<36} {gpus:>4} {'-':>5} {PREFLIGHT_RUNTIME_MIN:>4} "
            f"{max(gpus, 1) * PREFLIGHT_RUNTIME_MIN / 60:>6.2f}  {job.runs} (like {job.run_id}, on the "
            f"checkpoint of {job.source_shape})"
        )
    return "\n".join(lines)


def bound_share(bound_hours: float, grid_hours: float) -> float:
    """The preflight's GPU-hour bound as a share of the grid's (``nan`` for an empty grid)."""
    return bound_hours / grid_hours if grid_hours > 0 else math.nan
