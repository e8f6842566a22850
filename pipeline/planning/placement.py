"""The site's side of job sizing (``pipeline.planning.jobs`` gives each job's GPUs and minutes): a job's partition and
sbatch options, its granted walltime and the chain of jobs a resumable job longer than its partition's limit takes
(docs/cluster.md#walltime-limits-and-chunks); a job that cannot resume is never clipped: ``WalltimeError``."""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Iterable

from pipeline.config.site import DEFAULT_CHUNK_STARTUP_MIN, Site


class JobKind(enum.StrEnum):
    """A kind of job, as the site file's ``slurm_extra`` names them; the fit, the corpus export and the token cache at
    paper scale are ``DATA`` (docs/planning.md#where-planning-lives)."""

    TRAINING = "training"
    GPU = "gpu"
    CPU = "cpu"
    DATA = "data"

    @property
    def resumable(self) -> bool:
        """A training or data job: warned ``signal_lead_s`` before its walltime ends, it stops and the next job
        resumes it, so one longer than its partition's limit is a chain of ``chunks`` jobs."""
        return self in (JobKind.TRAINING, JobKind.DATA)

    @property
    def on_gpu(self) -> bool:
        """Runs on the GPU partition at a site with GPUs (else on the CPU partition)."""
        return self not in (JobKind.CPU, JobKind.DATA)

    @property
    def extra_key(self) -> str:
        """The site file's ``slurm_extra`` key of the kind (data jobs: ``cpu``)."""
        return JobKind.CPU.value if self is JobKind.DATA else self.value

    @property
    def partition_keys(self) -> tuple[str, str]:
        """The site file's keys of its partition and that partition's walltime limit."""
        return ("gpu_partition", "max_runtime_min") if self.on_gpu else ("cpu_partition", "cpu_max_runtime_min")


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where a kind of job runs, as sbatch options; ``resumable``: the kind's (``JobKind.resumable``), with its
    walltime warning ``signal_lead_s`` (0: none)."""

    partition: str
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    sbatch_flags: tuple[str, ...] = ()
    signal_lead_s: int = 0
    resumable: bool = False


@dataclasses.dataclass(frozen=True)
class JobRequest:
    """What one job asks for (``placement`` None: a local job, only ``micro_batch`` set): ``minutes`` granted to each
    SLURM job, ``needed_minutes`` its own estimate (None: not estimated), ``chunks`` jobs in its chain."""

    gpus: int = 0
    micro_batch: int | None = None
    placement: Placement | None = None
    gpu_model: str | None = None
    cpus: int | None = None
    mem_mb: int | None = None
    minutes: int | None = None
    needed_minutes: int | None = None
    chunks: int = 1

    @property
    def sbatch_flags(self) -> tuple[str, ...]:
        """Its placement's ``sbatch_flags`` and ``--signal=URG@<lead>`` at its ``minutes`` (None: unknown, the lead
        uncapped); the lead at most half the walltime: SLURM sends no warning whose lead reaches back to the job's
        start."""
        if self.placement is None:
            return ()
        where = self.placement
        if not where.signal_lead_s:
            return where.sbatch_flags
        lead = where.signal_lead_s if self.minutes is None else min(where.signal_lead_s, self.minutes * 60 // 2)
        return (*where.sbatch_flags, f"--signal=URG@{lead}")

    def resources(self) -> dict:
        """The request under Snakemake's and the SLURM executor plugin's resource names, plus the pipeline's own
        (``micro_batch``, ``chunks``) that a rule's shell command reads; what it leaves unset left out (a local job's
        placement, a site's unset option, a micro-batch but for training, chunks but for a resumable job)."""
        values = {"gpu": self.gpus}
        if (where := self.placement) is not None:
            values = {
                "slurm_partition": where.partition,
                "nodes": 1,
                "gpu": self.gpus,
                "cpus_per_task": self.cpus,
                "mem_mb": self.mem_mb,
                "runtime": self.minutes,
                "needed_min": self.minutes if self.needed_minutes is None else self.needed_minutes,
                "slurm_account": where.account,
                "qos": where.qos,
                "constraint": where.constraint,
                "slurm_extra": " ".join(self.sbatch_flags),
                "gpu_model": self.gpu_model,
            }
        values |= {"micro_batch": self.micro_batch, "chunks": self.chunks if where and where.resumable else None}
        return {name: value for name, value in values.items() if value not in (None, "")}

    def for_preflight(self, minutes: int) -> JobRequest:
        """The request of the preflight job that stands for this one: ``minutes`` in one chunk (no site: unchanged)."""
        if self.minutes is None:
            return self
        return dataclasses.replace(self, minutes=minutes, needed_minutes=minutes, chunks=1)


CHAIN_MARGIN_RETRIES = 2
"""Attempts a chain gets beyond its chunks, for preemption and node loss (the SLURM profile's ``retries``)."""


class WalltimeError(ValueError):
    """A job cannot resume, or its chunks would train no time after their start-up; names the job, estimate, limit."""


def chunk_count(needed: int, granted: int, signal_lead_s: int, startup_min: float = DEFAULT_CHUNK_STARTUP_MIN) -> int:
    """Jobs of ``granted`` minutes a resumable run of ``needed`` takes: each trains ``granted - startup_min - lead``
    (lead ≤ half the walltime) of the run's ``needed - startup_min`` minutes; 0 where a chunk trains no minute."""
    if needed <= granted:
        return 1
    trains = granted - startup_min - min(signal_lead_s, granted * 60 // 2) / 60
    return math.ceil((needed - startup_min) / trains) if trains > 0 else 0


def chain_retries(chunks: Iterable[int]) -> int | None:
    """Snakemake's retries of a rule whose jobs take ``chunks`` jobs each: the longest chain's chunks - 1 +
    ``CHAIN_MARGIN_RETRIES``, so one ``snakemake`` call finishes every job; None without a chain (the profile's)."""
    longest = max(chunks, default=1)
    return longest - 1 + CHAIN_MARGIN_RETRIES if longest > 1 else None


def placement(site: Site, kind: JobKind) -> Placement:
    """Where jobs of ``kind`` run (GPU jobs on the CPU partition at a site without GPUs); a resumable job is sent SIGURG
    ``signal_lead_s`` before its walltime ends, not SIGTERM: SLURM signals every process of the job, and the embedded
    Ray's daemons would stop on SIGTERM mid-save but ignore SIGURG (``pipeline.execution.stop_signals``)."""
    on_gpus = kind.on_gpu and site.gpus_per_node > 0
    flags = [f"--reservation={site.reservation}"] if site.reservation else []
    if site.slurm_extra[kind.extra_key]:
        flags.append(site.slurm_extra[kind.extra_key])
    return Placement(
        site.gpu_partition if on_gpus else site.cpu_partition,
        site.account,
        site.qos,
        site.gpu_constraint if on_gpus else site.cpu_constraint,
        tuple(flags),
        site.signal_lead_s if kind.resumable else 0,
        kind.resumable,
    )


def walltime(site: Site, job: str, kind: JobKind, needed: int) -> tuple[int, int]:
    """(minutes granted to each SLURM job, chunks) of ``job`` needing ``needed``: a resumable job longer than its
    partition's limit is a chain of jobs of that limit; else, or a chain that trains no minute: ``WalltimeError``."""
    where = placement(site, kind)
    limit = site.partition_limit_min(where.partition)
    if needed <= limit:
        return needed, 1
    if not kind.resumable:
        partition_key, limit_key = kind.partition_keys
        raise WalltimeError(
            f"{job} needs an estimated {needed} min but partition {where.partition!r} allows "
            f"{limit} min and the job cannot resume; set {partition_key} in the site file to a partition "
            f"that allows at least {needed} min and {limit_key} to its limit."
        )
    startup = site.chunk_startup_min
    chunks = chunk_count(needed, limit, where.signal_lead_s, startup)
    if chunks == 0:
        raise WalltimeError(
            f"{job} needs an estimated {needed} min but partition {where.partition!r} allows "
            f"{limit} min, too few to train after each job's {startup:g}-min start-up "
            f"(chunk_startup_min) and {where.signal_lead_s}-s walltime warning; raise the "
            "partition's limit or lower chunk_startup_min or signal_lead_s in the site file."
        )
    return limit, chunks


def site_request(
    site: Site, job: str, kind: JobKind, gpus: int, minutes: int | None, micro_batch: int | None = None
) -> JobRequest:
    """``job`` (as a ``WalltimeError`` names it) on ``gpus`` GPUs, needing ``minutes``; at a site without GPUs on its
    CPU limits: a training run with estimated ``minutes`` as planned, any other job for the whole limit."""
    where = placement(site, kind)
    if site.gpus_per_node == 0 and (not kind.resumable or minutes is None):
        limit = site.partition_limit_min(where.partition)
        return JobRequest(0, micro_batch, where, None, site.cpu_max_cpus, site.cpu_max_mem_mb, limit)
    granted, chunks = walltime(site, job, kind, minutes)
    if site.gpus_per_node == 0:
        return JobRequest(0, micro_batch, where, None, site.cpu_max_cpus, site.cpu_max_mem_mb, granted, minutes, chunks)
    cpus, mem_mb, model = site.cpus_per_gpu * gpus, site.mem_mb_per_gpu * gpus, site.gpu_model if kind.on_gpu else None
    return JobRequest(gpus, micro_batch, where, model, cpus, mem_mb, granted, minutes, chunks)


def resource_names(site: Site | None, kind: JobKind) -> list[str]:
    """The Snakemake resources each job of ``kind`` has: those a request of the kind renders at ``site``
    (``JobRequest.resources``), a training job's micro-batch included."""
    micro_batch = 0 if kind is JobKind.TRAINING else None
    sample = JobRequest(0, micro_batch) if site is None else site_request(site, "", kind, 1, 1, micro_batch)
    return list(sample.resources())
