"""The preflight's jobs in the grid (docs/cluster.md#preflight): one ``Shape`` per training job shape and one
``StageJob`` per kind of job after pretraining, with their walltimes."""

import dataclasses
import json
import math
from typing import Any

from pipeline.planning.cost import CHECKPOINT_BYTES_PER_PARAMETER
from pipeline.planning.grid import FINETUNE_METHODS, Finetuning, Grid, Workload
from pipeline.planning.placement import WalltimeError

PREFLIGHT_RUNTIME_MIN = 20
"""Walltime of a preflight stage job, and the least of a training shape's (``preflight_minutes``)."""
PREFLIGHT_BASE_MIN = 15
"""Minutes of a preflight training job besides its updates and checkpoint I/O: two start-ups and two evaluations."""
CHECKPOINT_GB_PER_MIN = 30
"""Shared-filesystem bandwidth a preflight job's checkpoint save and restore are planned at (0.5 GB/s)."""
DEFAULT_WARMUP, DEFAULT_TIMED = 3, 20
"""Untimed (compilation) and timed updates of a preflight training job; the preset's ``preflight`` key sets them."""


@dataclasses.dataclass(frozen=True)
class Shape:
    """One training job shape, family × size × GPUs × micro-batch (0: the whole per-device batch): what decides speed
    and memory; the runs it stands for (its preflight trains ``runs[0]``) and that job's walltime."""

    family: str
    size: str
    gpus: int
    micro_batch: int
    runs: tuple[str, ...]
    minutes: int

    @property
    def shape_id(self) -> str:
        return f"{self.family}-{self.size}-g{self.gpus}-mb{self.micro_batch}"

    @property
    def run_id(self) -> str:
        return self.runs[0]


def preflight_minutes(jobs, run_id: str, updates: int) -> int | None:
    """Walltime of the preflight job of ``updates`` updates of run ``run_id`` on the GPUs ``jobs`` (a ``JobSizing``)
    gives it: ``PREFLIGHT_BASE_MIN`` + updates × GPU-hours × safety factor / GPUs / steps + a checkpoint's save and
    restore + the warning's lead (so it comes after the work); None without GPUs; over the limit: ``WalltimeError``."""
    site = jobs.site
    if site is None or site.gpus_per_node == 0:
        return None
    workload = jobs.grid.workloads[run_id]
    need = jobs.need(workload)
    step_min = need.measured.gpu_hours * site.safety_factor / need.gpus / workload.train.steps * 60
    checkpoint_gb = workload.parameters * CHECKPOINT_BYTES_PER_PARAMETER / 1e9
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
    """The pretraining runs ``jobs`` sizes, grouped by shape id, with the walltime of their first's ``warmup + timed``
    updates; as sized before the preflight (``before_preflight``), so its throughput leaves the shapes unchanged."""
    jobs = jobs.before_preflight
    grouped: dict[tuple[str, str, int, int], list[str]] = {}
    for run_id, workload in jobs.grid.pretraining.items():
        job = jobs.training(run_id)
        grouped.setdefault((workload.family, workload.run.size, job.gpus, job.micro_batch or 0), []).append(run_id)
    settings = jobs.config.get("preflight", {})
    updates = settings.get("warmup", DEFAULT_WARMUP) + settings.get("timed", DEFAULT_TIMED)
    shapes = [
        Shape(*key, tuple(runs), max(PREFLIGHT_RUNTIME_MIN, preflight_minutes(jobs, runs[0], updates) or 0))
        for key, runs in grouped.items()
    ]
    return {shape.shape_id: shape for shape in shapes}


@dataclasses.dataclass(frozen=True)
class StageJob:
    """One preflight job of ``kind``: stands for ``runs`` grid jobs of it and runs like the first, ``job`` (for an
    analysis: the run it reads), on the checkpoint of its source run's shape (``pipeline.preflight.stages``)."""

    kind: str
    job: Workload
    runs: int

    @property
    def run_id(self) -> str:
        return self.job.model_id

    @property
    def lm_eval(self) -> bool:
        """Whether it runs lm-eval: its work imports torch and reads lm-eval's task files and prefetch records."""
        return self.kind == "downstream"

    def source_shape(self, shapes: dict[str, Shape]) -> str:
        """The shape (of ``shapes``) whose preflight checkpoint it runs on: its source run's."""
        return next(shape_id for shape_id, shape in shapes.items() if self.job.run.run_id in shape.runs)

    def resources(self, sizing):
        """What ``sizing`` (a ``pipeline.planning.jobs.JobSizing``) gives the grid's jobs of this kind."""
        if isinstance(self.job, Finetuning):
            return sizing.training(self.run_id)
        return sizing.gpu_analysis(self.kind, self.run_id)

    def settings(self, config: dict[str, Any], lm_eval: dict[str, Any]) -> str:
        """Its verb's settings as JSON: the fine-tune's spec, ``downstream`` with ``lm_eval`` and its run's pair, or
        ``analysis.<kind>``."""
        if isinstance(self.job, Finetuning):
            return self.job.finetune.to_json()
        if self.lm_eval:
            downstream = config["downstream"]
            pair = next(pair for pair, run_ids in downstream["pairs"].items() if self.run_id in run_ids)
            return json.dumps(
                {**downstream, "task_dir": lm_eval["task_dir"], "pair": pair, "prefetched": lm_eval["prefetched"]}
            )
        return json.dumps(config["analysis"][self.kind])


def stage_jobs(grid: Grid) -> dict[str, StageJob]:
    """The stage jobs of ``grid`` by kind, those it has of: ``finetune-<method>`` per fine-tuning method, ``downstream``
    and each GPU analysis (the one list of the kinds; ``pipeline.preflight.stages.STAGE_WORK``: each kind's work)."""
    stands_for: dict[str, list[Workload]] = {
        f"finetune-{method}": [job for job in grid.finetunes.values() if job.finetune.method == method]
        for method in FINETUNE_METHODS
    }
    stands_for["downstream"] = list(grid.downstream.values())
    stands_for |= {name: list(runs.values()) for name, runs in grid.analyses.items()}
    return {kind: StageJob(kind, jobs[0], len(jobs)) for kind, jobs in stands_for.items() if jobs}
