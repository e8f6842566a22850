"""What every job of a preset asks of a SLURM site: partition, GPUs, CPUs, memory, minutes and micro-batch
(docs/cluster.md#resources-per-job, #micro-batches); placement, walltimes and chains are
``pipeline.planning.placement``'s."""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from collections.abc import Iterable
from pathlib import Path

from pipeline.config.site import Site
from pipeline.data.rates import data_job_minutes, measured_minutes, site_rates
from pipeline.planning.grid import Grid, Workload
from pipeline.planning.measured import DEFAULT_MFU, PLAN_ROW, FitRow, FitTableError, MeasuredJob, MeasuredTable
from pipeline.planning.placement import JobKind, JobRequest, chain_retries, placement, site_request, walltime

ADAM_STATE_BYTES_PER_PARAMETER = 16
"""f32 parameters, gradients and AdamW's two moments, sharded over a job's GPUs (activations: the micro-batch's)."""
GPU_MEMORY_FOR_STATE = 0.5
"""The share of each GPU's memory the optimizer state may take (the other half for activations)."""
CPU_JOBS = {
    "corpus": {"cpus": 1, "mem_mb": 32000},
    "tokenizer": {"cpus": 1, "mem_mb": 16000, "minutes": 60},
    "token_cache": {"cpus": 32, "mem_mb": 128000},
    "fit": {"cpus": 1, "mem_mb": 4000},
    "data_rate": {"cpus": 2, "mem_mb": 16000, "minutes": 60},
}
"""CPU jobs at paper scale, CPUs and memory capped by the site's CPU limits (the corpus export and the fit are one
process each; the fit's peak was 1.2 GB, results/benchmarks/data-rates-2026-11-29.md). The
corpus export's, the token cache's and the fit table's minutes are measured (``JobSizing.cpu``); the tokenizer's and
the timed slice's (``data_rate``, ``pipeline.data.rates.measure_slice``) are not, so estimates, never capped."""
DATA_CHAINS = ("corpus", "token_cache")
"""The data jobs sized by their measured rates (``pipeline/data/data_rates.yaml``, each rule named as its rate), which
resume (``pipeline.data.shards``; ``pipeline.data.cache`` with Levanter's Ray builder): a chain of jobs where longer
than the CPU partition's limit."""
SMALL_CPU_JOB = {"cpus": 2, "mem_mb": 8000, "minutes": 60}
"""Any CPU job of a preset that reads no hub corpus (its corpora are the shipped ones of a few MB, e.g. ``tiny``): its
CPUs and memory, and the tokenizer's and the fit's minutes, a ceiling, not an estimate (a shorter partition limit
grants that limit)."""
GPU_ANALYSIS_MINUTES = {"spectra": 60, "lyapunov": 60, "frontier": 240, "downstream": 60, "memory_probe": 60}
"""Walltime of the one-GPU analyses (the frontier: 2 solvers × 5 step counts over a validation split) and of a
memory probe (a few steps); ``downstream`` (lm-eval) gets this plus its GPU-hours × ``safety_factor``
(``JobSizing.gpu_analysis``)."""


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
    """Walltime (min) = GPU-hours × safety factor / GPUs + ``chunk_startup_min`` (a CPU job: ``gpus`` 1, its hours)."""
    return math.ceil(gpu_hours * site.safety_factor / gpus * 60 + site.chunk_startup_min)


@dataclasses.dataclass(frozen=True)
class TrainingNeed:
    """What a pretraining run or fine-tune needs at a site (``JobSizing.need``): GPUs, minutes (None: not estimated)
    and the measured table's answer they come from."""

    gpus: int
    minutes: int | None
    measured: MeasuredJob


def usable_fit_row(measured: MeasuredJob, gpus: int) -> FitRow | None:
    """The job's fit row on ``gpus`` GPUs (None: none); ``FitTableError`` with the sentence of a refused one."""
    if gpus in measured.refused:
        raise FitTableError(measured.refused[gpus])
    return measured.fit_rows.get(gpus)


class JobSizing:
    """Each job's request for one preset's ``grid`` at one site (``None``: local jobs on the CPU), by workload id."""

    def __init__(
        self,
        grid: Grid,
        site: Site | None,
        fit_table: str | Path | None = None,
        preflight_table: str | Path | None = None,
        data_rates: str | Path | None = None,
    ):
        self.grid = grid
        self.config = grid.config
        self.site = site
        device, mfu = (site.device, site.mfu) if site else ("cpu", DEFAULT_MFU)
        self.measured = MeasuredTable(grid, device, mfu=mfu, preflight_table=preflight_table, fit_table=fit_table)
        self.data_rates = data_rates
        self._read: dict[tuple[int | None, ...], JobSizing] = {}
        self._needs: dict[str, TrainingNeed] = {}

    @property
    def tables(self) -> dict[str, str]:
        """The tables the site's GPU jobs are sized by, by input name; none without GPUs (a preflight report is then
        read where it exists)."""
        if not (self.site and self.site.gpus_per_node):
            return {}
        return {"fit": str(self.measured.fit_table), "preflight": str(self.measured.preflight_table)}

    def reading(self, tables: Iterable[str] = ()) -> JobSizing:
        """This sizing with its tables as they are now (a job of the same call may rewrite one); ``FileNotFoundError``
        for a missing one of ``tables``, so Snakemake shows the job's resources as ``<TBD>`` until it is written."""
        for table in tables:
            os.stat(table)
        paths = (self.measured.fit_table, self.measured.preflight_table)
        stamp = tuple(os.stat(path).st_mtime_ns if path and os.path.exists(path) else None for path in paths)
        if stamp not in self._read:
            self._read = {stamp: JobSizing(self.grid, self.site, *paths, self.data_rates)}
        return self._read[stamp]

    def gpu_hours(self, workload_id: str) -> float:
        """GPU-hours of one workload on the site's device, as the cost preview counts them (``MeasuredTable.job``)."""
        return self.measured.job(self.grid.workloads[workload_id], required=True).gpu_hours

    def chain_retries(self, workload_ids: Iterable[str]) -> int | None:
        """Snakemake's retries of the rule that trains ``workload_ids`` (``chain_retries`` of their chunks)."""
        return chain_retries(self.training_chunks(workload_id) for workload_id in workload_ids)

    def training_chunks(self, workload_id: str) -> int:
        """The SLURM jobs a pretraining run or fine-tune takes at the site (1 where its need is not estimated)."""
        if self.site is None:
            return 1
        needed = self.need(self.grid.workloads[workload_id]).minutes
        return 1 if needed is None else walltime(self.site, f"run {workload_id}", JobKind.TRAINING, needed)[1]

    def need(self, workload: Workload) -> TrainingNeed:
        """A training job's ``TrainingNeed``, counted once per sizing: at a site with GPUs ``training_gpus`` and
        ``training_minutes``; without, 0 GPUs and, unless its rate was measured on the site's ``device``, None minutes
        (a GPU's FLOPs estimate says nothing of a CPU)."""
        if workload.run_id not in self._needs:
            on_gpus = self.site.gpus_per_node > 0
            measured = self.measured.job(workload, self.site.gpu_memory_bytes, required=on_gpus)
            gpus, minutes = 0, None
            if on_gpus:
                gpus = training_gpus(measured.gpu_hours, workload.parameters, workload.train.batch_size, self.site)
            if on_gpus or measured.source in ("preflight", "measured"):
                minutes = training_minutes(measured.gpu_hours, gpus or 1, self.site)
            self._needs[workload.run_id] = TrainingNeed(gpus, minutes, measured)
        return self._needs[workload.run_id]

    def micro_batch(self, workload: Workload, need: TrainingNeed) -> int:
        """Examples per device per forward/backward (0: the whole batch): the preset's ``train.micro_batch_size``,
        else the fit row's at the job's GPUs; with neither, ``FitTableError`` (without a table to read: 0)."""
        train, gpus = workload.train, need.gpus
        if train.micro_batch_size is not None:
            per_gpu = train.batch_size // gpus
            if train.micro_batch_size > per_gpu or per_gpu % train.micro_batch_size:
                raise FitTableError(
                    f"run {workload.run_id}: the preset's train.micro_batch_size {train.micro_batch_size} "
                    f"does not divide its batch of {per_gpu} per GPU on the {gpus} GPU(s) the site "
                    f"gives it; set a divisor of {per_gpu} (the fit table plans one)."
                )
            return train.micro_batch_size
        row = usable_fit_row(need.measured, gpus)
        if row is None:
            if self.measured.fit_table is None:
                return 0
            raise FitTableError(
                f"{self.measured.fit_table}: no row for {workload.run_id} on {gpus} GPU(s) of "
                f"{self.site.gpu_memory_gb:g} GB (the preflight's throughput gave it GPUs the table was "
                f"not planned for); {PLAN_ROW}, or set its train.micro_batch_size in the preset."
            )
        if not row.fits:
            more = "more GPUs (a lower target_runtime_min)"
            if gpus == self.site.gpus_per_node:
                more = "a node with more GPUs (gpus_per_node)"
            raise FitTableError(
                f"{self.measured.fit_table}: run {workload.run_id} does not fit in {self.site.gpu_memory_gb:g} GB "
                f"per GPU on {gpus} GPU(s) even at micro-batch 1; give it {more} or GPUs with more "
                f"memory (gpu_memory_gb) in the site file, then {PLAN_ROW}."
            )
        return row.micro_batch

    def green(self) -> JobSizing:
        """This sizing once no preflight row is red: the grid's own jobs' (docs/planning.md#where-planning-lives)."""
        self.measured.require_green()
        return self

    def training(self, workload_id: str) -> JobRequest:
        """A pretraining run or fine-tune: GPUs, walltime and memory from its size, micro-batch from the fit table."""
        workload = self.grid.workloads[workload_id]
        if self.site is None:
            return JobRequest(0, workload.train.micro_batch_size or 0)
        need = self.need(workload)
        micro_batch = self.micro_batch(workload, need) if need.gpus else workload.train.micro_batch_size or 0
        return site_request(self.site, f"run {workload_id}", JobKind.TRAINING, need.gpus, need.minutes, micro_batch)

    @functools.cached_property
    def before_preflight(self) -> JobSizing:
        """This sizing without the preflight report: how the preflight sized the shapes it measured."""
        if self.measured.preflight_table is None:
            return self
        return JobSizing(self.grid, self.site, self.measured.fit_table)

    def gpu_count(self, workload_id: str) -> int:
        """The GPUs of a workload's job at a site with GPUs: a memory probe's one node's, the most that divide its
        batch (it steps its whole batch), a training job's from its size, a forward-only job's (lm-eval) one."""
        workload = self.grid.workloads[workload_id]
        if workload.whole_batch:
            return node_gpu_counts(workload.batch_size, self.site)[-1]
        return self.need(workload).gpus if workload.trains else 1

    def memory_probe(self, probe_id: str) -> JobRequest:
        """A memory probe on ``gpu_count`` GPUs; its fit row must fit its whole batch (never accumulated, Fig. 16)."""
        if self.site is None:
            return JobRequest()
        gpus = self.gpu_count(probe_id) if self.site.gpus_per_node else 0
        if gpus and self.measured.fit_table is not None:
            row = usable_fit_row(self.measured.job(self.grid.workloads[probe_id], self.site.gpu_memory_bytes), gpus)
            if row is None or not row.fits_at_paper_batch:
                raise FitTableError(
                    f"{self.measured.fit_table}: memory probe {probe_id} does not fit its whole batch of "
                    f"{self.grid.workloads[probe_id].batch_size} on {gpus} GPU(s) of {self.site.gpu_memory_gb:g} GB"
                    f"{' (no row)' if row is None else ''}, and a probe "
                    "measures one step of the whole batch (Fig. 16); give the site GPUs with more memory "
                    f"(gpu_memory_gb) or more per node (gpus_per_node), then {PLAN_ROW}."
                )
        return site_request(
            self.site, f"memory probe {probe_id}", JobKind.GPU, gpus, GPU_ANALYSIS_MINUTES["memory_probe"]
        )

    def gpu_analysis(self, rule: str, run_id: str) -> JobRequest:
        """A GPU analysis (spectra, lyapunov, frontier) or lm-eval (``downstream``) of run ``run_id``: one GPU for its
        ``GPU_ANALYSIS_MINUTES``, lm-eval's plus, at a site with GPUs, its GPU-hours × safety factor."""
        if self.site is None:
            return JobRequest()
        minutes = GPU_ANALYSIS_MINUTES[rule]
        if rule == "downstream" and self.site.gpus_per_node:
            minutes += math.ceil(self.gpu_hours(f"downstream-{run_id}") * self.site.safety_factor * 60)
        return site_request(self.site, f"{rule} of run {run_id}", JobKind.GPU, 1, minutes)

    def cpu(self, rule: str, dataset: str | None = None) -> JobRequest:
        """A CPU job on the CPU partition, sized as ``CPU_JOBS``, ``DATA_CHAINS`` and ``SMALL_CPU_JOB`` say: measured
        minutes (``pipeline.data.rates``; the fit's by the rows it plans) × ``safety_factor`` + ``chunk_startup_min``,
        a chain beyond the partition's limit where the job resumes (``walltime``; else ``WalltimeError``)."""
        if self.site is None:
            return JobRequest()
        need = CPU_JOBS[rule] if self.hub_corpora else SMALL_CPU_JOB
        cpus, mem_mb = min(need["cpus"], self.site.cpu_max_cpus), min(need["mem_mb"], self.site.cpu_max_mem_mb)
        kind = self.cpu_kind(rule)
        where = placement(self.site, kind)
        if rule not in DATA_CHAINS and not self.hub_corpora:
            minutes = min(SMALL_CPU_JOB["minutes"], self.site.partition_limit_min(self.site.cpu_partition))
            return JobRequest(0, None, where, None, cpus, mem_mb, minutes)
        needed = CPU_JOBS[rule].get("minutes")
        if rule in DATA_CHAINS:
            source = self.config["datasets"][dataset]["source"]
            corpus = source.get("corpus", dataset)  # a shipped corpus by its name, a hub one by its dataset's
            minutes = data_job_minutes(
                rule,
                corpus,
                cpus,
                source=source,
                builder=self.config["cache_builder"],
                site_rates=site_rates(self.data_rates, dataset),
            )
            needed = training_minutes(minutes / 60, 1, self.site)
        elif rule == "fit":  # a row per workload, and per training job once a preflight report may resize it
            rows = len(self.grid.workloads) + (len(self.grid.training) if self.measured.preflight_rows else 0)
            needed = training_minutes(measured_minutes(rule, rows, cpus) / 60, 1, self.site)
        job = f"{rule} job of {dataset}" if dataset else f"{rule} job"
        granted, chunks = walltime(self.site, job, kind, needed)
        return JobRequest(0, None, where, None, cpus, mem_mb, granted, needed, chunks)

    @functools.cached_property
    def hub_corpora(self) -> bool:
        """The preset reads a hub corpus: its data jobs are at paper scale."""
        return any(spec["source"]["kind"] == "hf" for spec in self.config["datasets"].values())

    def cpu_kind(self, rule: str) -> JobKind:
        """``JobKind.DATA`` for a resumable CPU job (the export; the token cache where Levanter's Ray builder keeps
        its ledger, not the serial one's; the fit, which keeps its rows), else ``JobKind.CPU``."""
        resumes = rule in ("corpus", "fit") or (rule == "token_cache" and self.config["cache_builder"] == "ray")
        return JobKind.DATA if resumes else JobKind.CPU

    def data_jobs(self, rule: str) -> dict[str, JobRequest]:
        """The requests of ``rule``'s jobs by dataset (a resumable data job's) or by rule (the others')."""
        datasets = self.config["datasets"] if rule in DATA_CHAINS else [None]
        return {dataset or rule: self.cpu(rule, dataset) for dataset in datasets}

    def data_retries(self, rule: str) -> int | None:
        """Snakemake's retries of a data rule: its longest chain's (``chain_retries``)."""
        return chain_retries(request.chunks for request in self.data_jobs(rule).values())
