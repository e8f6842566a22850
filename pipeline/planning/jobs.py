"""What every job of a preset asks of a SLURM site: partition, GPUs, CPUs, memory, minutes and micro-batch.

A training run (pretraining, fine-tune) gets the fewest GPUs of one node that

- hold its optimizer state: 16 bytes per parameter (f32 parameters, gradients and AdamW's two moments), at most
  half of each GPU's memory (the other half for activations), sharded across the GPUs, and
- finish within ``target_runtime_min``: wall-clock = GPU-hours × ``safety_factor`` / GPUs, with GPU-hours from
  ``pipeline.planning.cost`` (measured throughput where the preset's preflight report measured the model on the site's
  device, or a fine-tune of its method there, else where ``results/benchmarks/throughput-sizes-<device>.csv`` has
  it, else FLOPs at ``mfu`` of the device's peak),

and divide its batch size (data parallelism); it needs that wall-clock plus the site's ``chunk_startup_min``, its
host memory and CPUs ``mem_mb_per_gpu`` and ``cpus_per_gpu`` per GPU, always on one node. At a site without GPUs
a run is one CPU job, estimated only where the site's ``device`` was measured (its preflight rows, its throughput
table); unmeasured, it is granted its partition's limit, its need unknown. A run that needs longer than its
partition's limit (``Site.partition_limit_min``) is a planned chain of ``chunks`` jobs of that limit, each resuming
the previous one's checkpoint (``chunk_count``); Snakemake's attempts of its rule cover the longest chain
(``workflow/rules/resources.smk``). A job that cannot resume (data, fit, lm-eval, GPU analyses) and needs longer than
its partition's limit raises ``WalltimeError`` naming the job, its estimate and the limit: nothing is clipped.

That sizing counts no activations. Its ``micro_batch`` (examples per device per forward/backward, Levanter's
``per_device_parallelism``; 0: the whole per-device batch at once) comes from the fit table
(``pipeline.planning.fit``) where that table has the job's row: planned for the run as the preset defines it now
(``plan_key``), at the job's GPU count, of the site's GPU memory and the share of it JAX reserves. A
``train.micro_batch_size`` the preset sets wins over the table. A job with neither, or whose row fits at no
micro-batch or is stale, raises ``FitTableError`` before anything is submitted. A job whose preflight row is red
raises ``PreflightError`` (``pipeline.planning.preflight_rows``): a pretraining run its shape's, a fine-tune its
method's stage job's (``finetune-lora``, ``finetune-full``), lm-eval and each GPU analysis its stage job's. A run's
shape is the one it had before the preflight measured anything (``preflight_shape``), so a row goes on governing
its runs after a measured throughput changes their GPUs.

A memory probe (Fig. 16) measures one step of its whole batch, never accumulated: it gets one node's GPUs (the most
that divide its batch), and its fit row must say that batch fits there.

Longer than 300 lines because every kind of job is sized here, by one ``JobSizing`` that reads the cost preview, the
fit table and the preflight report once for all of them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pipeline.config.site import DEFAULT_CHUNK_STARTUP_MIN, Site, preset_results
from pipeline.execution.job_env import GPU_MEMORY_FRACTION_ENV, gpu_memory_fraction
from pipeline.planning.checkpoint_disk import CHECKPOINT_BYTES_PER_PARAMETER
from pipeline.planning.grid import Grid
from pipeline.planning.job_request import JobKind, JobRequest, Placement
from pipeline.planning.preflight_rows import PreflightRow, preflight_throughput, read_rows, require_green, shape_id
from pipeline.planning.workloads import Workload, workload_vocab_size

STARTUP_MIN = DEFAULT_CHUNK_STARTUP_MIN
"""The default of the site's ``chunk_startup_min``: minutes a training job spends before its first step and after
its last (JAX compilation, opening the token cache, loading or writing a checkpoint)."""
PREFLIGHT_BASE_MIN = 15
"""Minutes of a preflight training job besides its updates and checkpoint I/O: two start-ups (the job and its
restart from the checkpoint: JAX compilation, opening the token cache) and two evaluations."""
CHECKPOINT_GB_PER_MIN = 30
"""Shared-filesystem bandwidth a preflight job's checkpoint save and restore are planned at (0.5 GB/s)."""
CHAIN_MARGIN_RETRIES = 2
"""Attempts a chain of training jobs gets beyond its chunks: for preemption, node loss and other transient failures
(the SLURM profile's ``retries`` for a job that fits one walltime)."""
ADAM_STATE_BYTES_PER_PARAMETER = 16
GPU_MEMORY_FOR_STATE = 0.5
CPU_JOBS = {
    "corpus": {"cpus": 8, "mem_mb": 32000, "minutes": 480},
    "tokenizer": {"cpus": 1, "mem_mb": 16000, "minutes": 60},
    "token_cache": {"cpus": 32, "mem_mb": 128000, "minutes": 720},
    "fit": {"cpus": 8, "mem_mb": 64000, "minutes": 720},
}
"""CPU jobs at paper scale (OpenWebText: ~40 GB of text, ~9 B tokens; the fit table: XLA compiles every run's train
step, 1–3 CPU-minutes each for the largest); CPUs and memory capped by the site's CPU limits, minutes never."""
SMALL_CPU_JOB = {"cpus": 2, "mem_mb": 8000, "minutes": 60}
"""Any CPU job of a preset that reads no hub corpus (its corpora are the shipped ones of a few MB, e.g. ``tiny``):
seconds to minutes, so ``minutes`` is a ceiling, not an estimate (a shorter partition limit grants that limit)."""
GPU_ANALYSIS_MINUTES = {"spectra": 60, "lyapunov": 60, "frontier": 240, "downstream": 60, "memory_probe": 60}
"""Walltime of the one-GPU analyses (the frontier: 2 solvers × 5 step counts over a validation split) and of a
memory probe (a few steps); ``downstream`` gets this plus its lm-eval GPU-hours × ``safety_factor``
(``JobSizing.downstream``)."""


class WalltimeError(ValueError):
    """A job cannot finish within its partition's walltime limit: it cannot resume, or its chunks would train for
    no time after their start-up; the message names the job, its estimate and the limit."""


def chunk_count(needed: int, granted: int, signal_lead_s: int, startup_min: float = STARTUP_MIN) -> int:
    """Jobs of ``granted`` minutes a resumable run of ``needed`` minutes takes: each spends ``startup_min`` starting
    and stops its walltime warning's lead (at most half its walltime) early, so it trains
    ``granted - startup_min - lead`` of the run's ``needed - startup_min`` minutes; 0 where a chunk trains no
    minute at all."""
    if needed <= granted:
        return 1
    trains = granted - startup_min - min(signal_lead_s, granted * 60 // 2) / 60
    return math.ceil((needed - startup_min) / trains) if trains > 0 else 0


class FitTableError(ValueError):
    """A training job or memory probe has no usable fit row (missing, stale, or it fits at no micro-batch); the
    message says what to change, and the caller says how to plan the table again."""


def node_gpu_counts(batch_size: int, site: Site) -> list[int]:
    """The GPU counts a job on one node can use for data parallelism: those dividing ``batch_size``, ascending."""
    return [n for n in range(1, site.gpus_per_node + 1) if batch_size % n == 0]


def training_gpus(gpu_hours: float, parameters: int, batch_size: int, site: Site) -> int:
    """The fewest GPUs of one node (dividing ``batch_size``) that hold the optimizer state and finish within the
    target walltime; the most that divide ``batch_size`` when none does both."""
    counts = node_gpu_counts(batch_size, site)
    state_gb = ADAM_STATE_BYTES_PER_PARAMETER * parameters / 1e9
    for gpus in counts:
        fits = state_gb / gpus <= GPU_MEMORY_FOR_STATE * site.gpu_memory_gb
        if fits and training_minutes(gpu_hours, gpus, site) <= site.target_runtime_min:
            return gpus
    return counts[-1]


def training_minutes(gpu_hours: float, gpus: int, site: Site) -> int:
    """Walltime in minutes: GPU-hours × safety factor / GPUs (a site without GPUs: one CPU job, ``gpus`` 1), plus the
    site's ``chunk_startup_min``."""
    return math.ceil(gpu_hours * site.safety_factor / gpus * 60 + site.chunk_startup_min)


class JobSizing:
    """Each job's request for one preset's ``grid`` at one site; ``None`` as the site: local jobs on the CPU. Jobs
    are named by their workload id (``pipeline.planning.workloads``): a run, a fine-tune, a probe or
    ``downstream-<run>``."""

    def __init__(
        self,
        grid: Grid,
        site: Site | None,
        fit_table: str | Path | None = None,
        preflight_table: str | Path | None = None,
    ):
        self.grid = grid
        self.config = grid.config
        self.site = site
        self.fit_table = fit_table
        self.preflight_table = preflight_table
        self._workloads: dict[str, Workload] = grid.workloads
        self._costs: dict[str, dict[str, Any]] = {}

    @functools.cached_property
    def _measured(self) -> dict[tuple[str, str, int], float]:
        """Training tokens/s per GPU of the site's device by model: the throughput table's."""
        from pipeline.planning.throughput import default_throughput_path, read_throughput

        path = default_throughput_path(self.site.device)
        return read_throughput(path, self.site.device) if path.is_file() else {}

    @functools.cached_property
    def _preflight_throughput(self) -> dict[str, float]:
        """Training tokens/s per GPU of the site's device by workload id, as the preflight measured them (wins over
        ``_measured``)."""
        if self.preflight_table is None:
            return {}
        return preflight_throughput(self.preflight_table, self.site.device, self.grid)

    def cost(self, workload_id: str) -> dict[str, Any]:
        """The cost preview's row of one workload (``gpu_hours``, ``parameters``, ...) on the site's device."""
        from pipeline.planning.cost import cost_rows

        if workload_id not in self._costs:
            self._costs[workload_id] = cost_rows(
                [self._workloads[workload_id]],
                self.site.device,
                self._measured,
                self.site.mfu,
                self.config,
                self._preflight_throughput,
                preset_results(self.site, self.config["preset"]),
            )[0]
        return self._costs[workload_id]

    @functools.cached_property
    def _preflight_rows(self) -> dict[str, PreflightRow]:
        """The preflight report's rows, read once for every job of the workflow (empty without a report)."""
        return {} if self.preflight_table is None else read_rows(self.preflight_table)

    def require_green_preflight(self, row_key: str, grid_job: str) -> None:
        """Stop (``PreflightError``) where the preflight row ``row_key`` that stands for ``grid_job`` is red."""
        require_green(self.preflight_table, self._preflight_rows, row_key, grid_job)

    def placement(self, kind: JobKind) -> Placement:
        """Where jobs of ``kind`` run: GPU jobs on the GPU partition (on the CPU partition at a site without GPUs),
        with that partition's constraint, and the site's ``slurm_extra`` of the kind; a training job is sent SIGURG
        ``signal_lead_s`` before its walltime ends (at most half its walltime: ``pipeline.planning.job_request``), so
        that it saves a checkpoint and stops (``pipeline.execution.stop_signals``: SLURM signals every process of the
        job, and the embedded Ray's daemons would stop on SIGTERM mid-save but ignore SIGURG)."""
        site = self.site
        on_gpus = kind.on_gpu and site.gpus_per_node > 0
        flags = [f"--reservation={site.reservation}"] if site.reservation else []
        if site.slurm_extra[kind]:
            flags.append(site.slurm_extra[kind])
        return Placement(
            site.gpu_partition if on_gpus else site.cpu_partition,
            site.account,
            site.qos,
            site.gpu_constraint if on_gpus else site.cpu_constraint,
            tuple(flags),
            site.signal_lead_s if kind.resumable else 0,
        )

    def walltime(self, job: str, kind: JobKind, needed: int) -> tuple[int, int]:
        """The minutes granted to each SLURM job of ``job`` (of ``kind``) that needs ``needed`` minutes, and its
        chunks: a training job longer than its partition's limit is a chain of jobs of that limit (``chunk_count``);
        any other job longer than the limit, or a chain whose jobs would train no minute, raises
        ``WalltimeError``."""
        placement = self.placement(kind)
        limit = self.site.partition_limit_min(placement.partition)
        if needed <= limit:
            return needed, 1
        if not kind.resumable:
            partition_key, limit_key = kind.partition_keys
            raise WalltimeError(
                f"{job} needs an estimated {needed} min but partition {placement.partition!r} allows "
                f"{limit} min and the job cannot resume; set {partition_key} in the site file to a partition "
                f"that allows at least {needed} min and {limit_key} to its limit."
            )
        startup = self.site.chunk_startup_min
        chunks = chunk_count(needed, limit, placement.signal_lead_s, startup)
        if chunks == 0:
            raise WalltimeError(
                f"{job} needs an estimated {needed} min but partition {placement.partition!r} allows "
                f"{limit} min, too few to train after each job's {startup:g}-min start-up "
                f"(chunk_startup_min) and {placement.signal_lead_s}-s walltime warning; raise the "
                "partition's limit or lower chunk_startup_min or signal_lead_s in the site file."
            )
        return limit, chunks

    def _gpu_job(
        self, job: str, kind: JobKind, gpus: int, minutes: int | None, micro_batch: int | None = None
    ) -> JobRequest:
        """``job`` (named so in a ``WalltimeError``), of ``kind``, on ``gpus`` GPUs, needing ``minutes``
        (``walltime``). At a site without GPUs it runs on the CPU partition with the CPU job limits: a training run
        whose ``minutes`` were estimated (``training_need``) as planned, any other job for the whole limit, its
        need not estimated."""
        site = self.site
        if site.gpus_per_node == 0:
            placement = self.placement(kind)
            if not kind.resumable or minutes is None:
                return JobRequest(
                    0,
                    micro_batch,
                    placement,
                    None,
                    site.cpu_max_cpus,
                    site.cpu_max_mem_mb,
                    site.partition_limit_min(placement.partition),
                )
            granted, chunks = self.walltime(job, kind, minutes)
            return JobRequest(
                0, micro_batch, placement, None, site.cpu_max_cpus, site.cpu_max_mem_mb, granted, minutes, chunks
            )
        granted, chunks = self.walltime(job, kind, minutes)
        return JobRequest(
            gpus,
            micro_batch,
            self.placement(kind),
            site.gpu_model,
            site.cpus_per_gpu * gpus,
            site.mem_mb_per_gpu * gpus,
            granted,
            minutes,
            chunks,
        )

    def chain_retries(self, workload_ids: Iterable[str]) -> int | None:
        """Snakemake's retries of the rule that trains ``workload_ids``: where one of them needs a chain of jobs,
        the longest chain's chunks after the first plus ``CHAIN_MARGIN_RETRIES``, so that one ``snakemake`` call
        trains every run to its end; else None (the command's ``--retries``: the SLURM profile's 2)."""
        chunks = max((self.training_chunks(workload_id) for workload_id in workload_ids), default=1)
        return chunks - 1 + CHAIN_MARGIN_RETRIES if chunks > 1 else None

    def training_chunks(self, workload_id: str) -> int:
        """The SLURM jobs a pretraining run or fine-tune takes at the site (1 where its need is not estimated)."""
        if self.site is None:
            return 1
        needed = self.training_need(workload_id)[1]
        return 1 if needed is None else self.walltime(f"run {workload_id}", JobKind.TRAINING, needed)[1]

    def training_need(self, workload_id: str) -> tuple[int, int | None]:
        """(GPUs, minutes needed) of a pretraining run or fine-tune at the site (``training_minutes``). Without GPUs:
        0 GPUs and, where the site's ``device`` was measured on the run (its preflight or throughput table: one CPU
        job's tokens/s), its minutes, else None (a GPU's FLOPs estimate says nothing of a CPU)."""
        if self.site.gpus_per_node == 0:
            workload = self._workloads[workload_id]
            measured = workload.run_id in self._preflight_throughput or workload.throughput_key in self._measured
            return 0, training_minutes(self.cost(workload_id)["gpu_hours"], 1, self.site) if measured else None
        gpus = self.training_gpu_count(workload_id)
        return gpus, training_minutes(self.cost(workload_id)["gpu_hours"], gpus, self.site)

    def training_gpu_count(self, workload_id: str) -> int:
        """The GPUs of a pretraining run or fine-tune at a site with GPUs (module docstring)."""
        row = self.cost(workload_id)
        return training_gpus(
            row["gpu_hours"], row["parameters"], self._workloads[workload_id].train.batch_size, self.site
        )

    @functools.cached_property
    def _fit_rows(self) -> dict[tuple[str, int, int], dict[str, Any]]:
        from pipeline.planning.fit_table import job_key, read_fit_rows

        if self.fit_table is None or not Path(self.fit_table).is_file():
            return {}
        return {job_key(row): row for row in read_fit_rows(Path(self.fit_table))}

    def fit_row(self, workload_id: str, gpus: int) -> dict[str, Any] | None:
        """The fit table's row of the job of ``workload_id`` (a pretraining run, fine-tune or memory probe) on
        ``gpus`` GPUs of the site's memory; ``None`` without one. A row planned for another spec of the run or
        another share of the GPU's memory is stale: ``FitTableError`` naming what changed."""
        from pipeline.planning.fit_table import stale_field

        row = self._fit_rows.get((workload_id, gpus, self.site.gpu_memory_bytes))
        if row is None:
            return None
        workload = self._workloads[workload_id]
        changed = stale_field(row, workload, workload_vocab_size(self.config, workload))
        if changed is not None:
            raise FitTableError(
                f"{self.fit_table}: the row of {workload_id} on {gpus} GPU(s) is stale: {changed} "
                "changed since it was planned; plan it again."
            )
        usable = int(self.site.gpu_memory_bytes * gpu_memory_fraction())
        if row["usable_bytes"] != usable:
            raise FitTableError(
                f"{self.fit_table}: the row of {workload_id} on {gpus} GPU(s) was planned for "
                f"{row['usable_bytes'] / 1e9:g} GB usable per GPU, but JAX now reserves "
                f"{usable / 1e9:g} GB ({GPU_MEMORY_FRACTION_ENV}); plan it again."
            )
        return row

    def micro_batch(self, workload_id: str, gpus: int) -> int:
        """Examples per device per forward/backward (0: the whole batch): the preset's ``train.micro_batch_size``
        where it sets one (an explicit choice wins), else the fit table's choice for this run at ``gpus`` GPUs of the
        site's memory; with neither, ``FitTableError`` (without a table to read: 0)."""
        train = self._workloads[workload_id].train
        if train.micro_batch_size is not None:
            per_gpu = train.batch_size // gpus
            if train.micro_batch_size > per_gpu or per_gpu % train.micro_batch_size:
                raise FitTableError(
                    f"run {workload_id}: the preset's train.micro_batch_size {train.micro_batch_size} "
                    f"does not divide its batch of {per_gpu} per GPU on the {gpus} GPU(s) the site "
                    f"gives it; set a divisor of {per_gpu} (the fit table plans one)."
                )
            return train.micro_batch_size
        row = self.fit_row(workload_id, gpus)
        if row is None:
            if self.fit_table is None:
                return 0
            raise FitTableError(
                f"{self.fit_table}: no row for {workload_id} on {gpus} GPU(s) of "
                f"{self.site.gpu_memory_gb:g} GB, so it would train its whole per-GPU batch at once; "
                "plan the runs first or set its train.micro_batch_size in the preset."
            )
        if not row["fits"]:
            more = (
                "a node with more GPUs (gpus_per_node)"
                if gpus == self.site.gpus_per_node
                else "more GPUs (a lower target_runtime_min)"
            )
            raise FitTableError(
                f"{self.fit_table}: run {workload_id} does not fit in {self.site.gpu_memory_gb:g} GB "
                f"per GPU on {gpus} GPU(s) even at micro-batch 1; give it {more} or GPUs with more "
                "memory (gpu_memory_gb) in the site file, then plan it again."
            )
        return int(row["micro_batch"])

    def training(self, workload_id: str, check_preflight: bool = True) -> JobRequest:
        """A pretraining run or fine-tune: GPUs, walltime and memory from its size, its micro-batch from the fit
        table; a pretraining run whose shape's preflight row is red raises, as does a fine-tune whose method's stage
        job's row is (``check_preflight``; module docstring)."""
        preset_micro_batch = self._workloads[workload_id].train.micro_batch_size or 0
        if self.site is None:
            request = JobRequest(0, preset_micro_batch)
        else:
            gpus, minutes = self.training_need(workload_id)
            micro_batch = self.micro_batch(workload_id, gpus) if gpus else preset_micro_batch
            request = self._gpu_job(f"run {workload_id}", JobKind.TRAINING, gpus, minutes, micro_batch)
        workload = self._workloads[workload_id]
        if check_preflight:
            self.require_green_preflight(workload.preflight_key(self), f"{workload.noun} {workload_id}")
        return request

    @functools.cached_property
    def before_preflight(self) -> JobSizing:
        """This sizing without the preflight report: how the preflight sized the shapes it measured."""
        return self if self.preflight_table is None else JobSizing(self.grid, self.site, self.fit_table)

    def preflight_shape(self, workload_id: str) -> str:
        """The shape id of pretraining run ``workload_id``: family, size, GPUs and micro-batch as sized before the
        preflight (``before_preflight``), which its measurement may change; the id of the row that stands for it."""
        request = self.before_preflight.training(workload_id, check_preflight=False)
        workload = self._workloads[workload_id]
        return shape_id(workload.family, workload.run.size, request.gpus, request.micro_batch or 0)

    def preflight_minutes(self, workload_id: str, updates: int) -> int | None:
        """Walltime of the preflight job that trains ``updates`` updates of a pretraining run on the GPUs the site
        gives it: ``PREFLIGHT_BASE_MIN`` + the updates at the run's estimated seconds per update (GPU-hours × safety
        factor / GPUs / steps) + a save and a restore of one checkpoint at ``CHECKPOINT_GB_PER_MIN`` + the site's
        walltime warning lead, so that the warning comes after the work; None without GPUs to estimate it on. Longer
        than the GPU partition's limit: ``WalltimeError``."""
        if self.site is None or self.site.gpus_per_node == 0:
            return None
        row, gpus = self.cost(workload_id), self.training_gpu_count(workload_id)
        step_min = row["gpu_hours"] * self.site.safety_factor / gpus / self._workloads[workload_id].train.steps * 60
        checkpoint_gb = row["parameters"] * CHECKPOINT_BYTES_PER_PARAMETER / 1e9
        minutes = math.ceil(
            PREFLIGHT_BASE_MIN
            + updates * step_min
            + 2 * checkpoint_gb / CHECKPOINT_GB_PER_MIN
            + self.site.signal_lead_s / 60
        )
        limit = self.site.partition_limit_min(self.site.gpu_partition)
        if minutes > limit:
            raise WalltimeError(
                f"the preflight job of run {workload_id} needs an estimated {minutes} min but "
                f"partition {self.site.gpu_partition!r} allows {limit} min; lower the preset's "
                "preflight.timed updates or raise max_runtime_min in the site file."
            )
        return minutes

    def memory_probe_gpu_count(self, probe_id: str) -> int:
        """A memory probe's GPUs at a site with GPUs: one node's, the most that divide its batch (module docstring)."""
        return node_gpu_counts(self._workloads[probe_id].batch_size, self.site)[-1]

    def memory_probe(self, probe_id: str) -> JobRequest:
        """A memory probe: one node's GPUs (``memory_probe_gpu_count``); its fit row must fit its whole batch there
        (module docstring)."""
        if self.site is None:
            return JobRequest()
        gpus = self.memory_probe_gpu_count(probe_id) if self.site.gpus_per_node else 0
        if gpus == 0 or self.fit_table is None:
            return self._gpu_job(f"memory probe {probe_id}", JobKind.GPU, gpus, GPU_ANALYSIS_MINUTES["memory_probe"])
        row = self.fit_row(probe_id, gpus)
        if row is None:
            raise FitTableError(
                f"{self.fit_table}: no row for memory probe {probe_id} on {gpus} GPU(s) of "
                f"{self.site.gpu_memory_gb:g} GB, so nothing says its whole batch fits there; plan "
                "it first."
            )
        if not row["fits_at_paper_batch"]:
            raise FitTableError(
                f"{self.fit_table}: memory probe {probe_id} does not fit its whole batch of "
                f"{row['batch_size']} on {gpus} GPU(s) of {self.site.gpu_memory_gb:g} GB, and a probe "
                "measures one step of the whole batch (Fig. 16); give the site GPUs with more memory "
                "(gpu_memory_gb) or more per node (gpus_per_node), then plan it again."
            )
        return self._gpu_job(f"memory probe {probe_id}", JobKind.GPU, gpus, GPU_ANALYSIS_MINUTES["memory_probe"])

    def gpu_analysis(self, rule: str, run_id: str, check_preflight: bool = True) -> JobRequest:
        """A GPU analysis (spectra, lyapunov, frontier) of run ``run_id``: one GPU for its ``GPU_ANALYSIS_MINUTES``.
        The preflight's stage job of the same name stands for it: red, it raises (``check_preflight``)."""
        if check_preflight:
            self.require_green_preflight(rule, f"{rule} of run {run_id}")
        if self.site is None:
            return JobRequest()
        return self._gpu_job(f"{rule} of run {run_id}", JobKind.GPU, 1, GPU_ANALYSIS_MINUTES[rule])

    def downstream(self, run_id: str, check_preflight: bool = True) -> JobRequest:
        """lm-eval of run ``run_id``: one GPU for ``GPU_ANALYSIS_MINUTES["downstream"]`` plus, at a site with GPUs,
        its lm-eval GPU-hours × safety factor. The preflight's lm-eval stage job stands for it: red, it raises
        (``check_preflight``)."""
        if check_preflight:
            self.require_green_preflight("downstream", f"downstream of run {run_id}")
        if self.site is None:
            return JobRequest()
        minutes = GPU_ANALYSIS_MINUTES["downstream"]
        if self.site.gpus_per_node:
            minutes += math.ceil(self.cost(f"downstream-{run_id}")["gpu_hours"] * self.site.safety_factor * 60)
        return self._gpu_job(f"downstream of run {run_id}", JobKind.GPU, 1, minutes)

    def cpu(self, rule: str) -> JobRequest:
        """A CPU job on the CPU partition: its paper-scale need (``CPU_JOBS``) where the preset reads a hub corpus,
        else ``SMALL_CPU_JOB``; CPUs and memory capped by the site's CPU limits, its minutes never
        (``WalltimeError`` beyond the CPU partition's limit: these jobs cannot resume)."""
        if self.site is None:
            return JobRequest()
        hub_corpora = any(spec["source"]["kind"] == "hf" for spec in self.config["datasets"].values())
        need = CPU_JOBS[rule] if hub_corpora else SMALL_CPU_JOB
        cpus, mem_mb = min(need["cpus"], self.site.cpu_max_cpus), min(need["mem_mb"], self.site.cpu_max_mem_mb)
        if not hub_corpora:
            minutes = min(SMALL_CPU_JOB["minutes"], self.site.partition_limit_min(self.site.cpu_partition))
            return JobRequest(0, None, self.placement(JobKind.CPU), None, cpus, mem_mb, minutes)
        minutes, _ = self.walltime(f"{rule} job", JobKind.CPU, need["minutes"])
        return JobRequest(0, None, self.placement(JobKind.CPU), None, cpus, mem_mb, minutes, need["minutes"])
