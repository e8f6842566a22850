"""What one job asks of a SLURM site and where it runs, whatever the job: its kind (``JobKind``), sbatch options
(``Placement``) and request (``JobRequest``, which renders its own Snakemake resources); its partition
(``placement``), the walltime it is granted and the chain of jobs a resumable job longer than its partition's limit
takes (``walltime``, ``chunk_count``), and the request of a job of known GPUs and minutes (``site_request``): the
site's side of job sizing, ``pipeline.planning.jobs`` computes each job's GPUs and minutes
(docs/cluster.md#walltime-limits-and-chunks). A job that cannot resume and needs longer than its partition's limit
raises ``WalltimeError`` naming the job, its estimate and the limit: nothing is clipped.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Iterable

from pipeline.config.site import DEFAULT_CHUNK_STARTUP_MIN, Site


class JobKind(enum.StrEnum):
    """A kind of job: pretraining and fine-tunes (``TRAINING``); lm-eval, the GPU analyses and memory probes
    (``GPU``); the tokenizer (``CPU``); the fit, and the corpus export and the token cache at paper scale (``DATA``)."""

    TRAINING = "training"
    GPU = "gpu"
    CPU = "cpu"
    DATA = "data"

    @property
    def resumable(self) -> bool:
        """A training or data job: warned ``signal_lead_s`` before its walltime ends, it stops and the next job
        resumes it (a checkpoint, the finished shards), so one longer than its partition's limit is a chain of
        ``chunks`` jobs."""
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
    """Where a kind of job runs at a site, as sbatch options: its partition, account, QoS, node constraint, further
    flags (the reservation, the site's extras for the kind), and a resumable job's walltime warning lead (0: none)."""

    partition: str
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    sbatch_flags: tuple[str, ...] = ()
    signal_lead_s: int = 0

    def flags(self, minutes: int | None = None) -> tuple[str, ...]:
        """The sbatch flags of a job of ``minutes`` walltime (None: not yet known, the lead uncapped): ``sbatch_flags``
        and the warning ``--signal=URG@<lead>``, the lead at most half the walltime: SLURM sends no warning whose
        lead reaches back to the job's start, so a job shorter than twice the site's lead is warned half-way."""
        if not self.signal_lead_s:
            return self.sbatch_flags
        lead = self.signal_lead_s if minutes is None else min(self.signal_lead_s, minutes * 60 // 2)
        return (*self.sbatch_flags, f"--signal=URG@{lead}")


@dataclasses.dataclass(frozen=True)
class JobRequest:
    """What one job asks for. Without a site (``placement`` None) a local job on this machine's CPU: ``gpus`` 0 and
    only ``micro_batch`` set; ``gpu_model`` only on a GPU partition that names one. ``minutes`` is the walltime
    granted to each SLURM job, ``needed_minutes`` the job's own estimate (None: not estimated) and ``chunks`` how
    many jobs of ``minutes`` a resumable job takes, each resuming where the previous one stopped."""

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
        """The job's further sbatch flags, its walltime warning capped by its ``minutes`` (``Placement.flags``)."""
        return () if self.placement is None else self.placement.flags(self.minutes)

    def resources(self) -> dict:
        """The request under Snakemake's and the SLURM executor plugin's resource names (one node; ``needed_min``
        the job's own estimate, else its walltime), plus the pipeline's own (``micro_batch``, ``chunks``) that a
        rule's shell command reads."""
        values = {"gpu": self.gpus, "micro_batch": self.micro_batch}
        if self.placement is not None:
            values |= {
                "slurm_partition": self.placement.partition,
                "slurm_account": self.placement.account,
                "qos": self.placement.qos,
                "constraint": self.placement.constraint,
                "slurm_extra": " ".join(self.sbatch_flags),
                "nodes": 1,
                "gpu_model": self.gpu_model,
                "cpus_per_task": self.cpus,
                "mem_mb": self.mem_mb,
                "runtime": self.minutes,
                "needed_min": self.minutes if self.needed_minutes is None else self.needed_minutes,
                "chunks": self.chunks,
            }
        return values

    def for_preflight(self, minutes: int) -> JobRequest:
        """The request of the preflight job that stands for this job: granted ``minutes`` in one chunk (its need:
        those minutes); without a site (no walltime) this request as it is."""
        if self.minutes is None:
            return self
        return dataclasses.replace(self, minutes=minutes, needed_minutes=minutes, chunks=1)


CHAIN_MARGIN_RETRIES = 2
"""Attempts a chain of jobs gets beyond its chunks: for preemption, node loss and other transient failures (the SLURM
profile's ``retries`` for a job that fits one walltime)."""


class WalltimeError(ValueError):
    """A job cannot finish within its partition's walltime limit: it cannot resume, or its chunks would train for
    no time after their start-up; the message names the job, its estimate and the limit."""


def chunk_count(needed: int, granted: int, signal_lead_s: int, startup_min: float = DEFAULT_CHUNK_STARTUP_MIN) -> int:
    """Jobs of ``granted`` minutes a resumable run of ``needed`` minutes takes: each spends ``startup_min`` starting
    and stops its walltime warning's lead (at most half its walltime) early, so it trains
    ``granted - startup_min - lead`` of the run's ``needed - startup_min`` minutes; 0 where a chunk trains no
    minute at all."""
    if needed <= granted:
        return 1
    trains = granted - startup_min - min(signal_lead_s, granted * 60 // 2) / 60
    return math.ceil((needed - startup_min) / trains) if trains > 0 else 0


def chain_retries(chunks: Iterable[int]) -> int | None:
    """Snakemake's retries of a rule whose jobs take ``chunks`` jobs each: where one is a chain, the longest chain's
    chunks after the first plus ``CHAIN_MARGIN_RETRIES``, so that one ``snakemake`` call finishes every job; else None
    (the command's ``--retries``: the SLURM profile's 2)."""
    longest = max(chunks, default=1)
    return longest - 1 + CHAIN_MARGIN_RETRIES if longest > 1 else None


def node_gpu_counts(batch_size: int, site: Site) -> list[int]:
    """The GPU counts a job on one node can use for data parallelism: those dividing ``batch_size``, ascending."""
    return [n for n in range(1, site.gpus_per_node + 1) if batch_size % n == 0]


def placement(site: Site, kind: JobKind) -> Placement:
    """Where jobs of ``kind`` run: GPU jobs on the GPU partition (on the CPU partition at a site without GPUs), with
    that partition's constraint, and the site's ``slurm_extra`` of the kind; a resumable job is sent SIGURG
    ``signal_lead_s`` before its walltime ends (at most half its walltime: ``Placement.flags``), so that it saves a
    checkpoint (a data job: ends its shard) and stops (``pipeline.execution.stop_signals``: SLURM signals every
    process of the job, and the embedded Ray's daemons would stop on SIGTERM mid-save but ignore SIGURG)."""
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
    )


def walltime(site: Site, job: str, kind: JobKind, needed: int) -> tuple[int, int]:
    """The minutes granted to each SLURM job of ``job`` (of ``kind``) that needs ``needed`` minutes, and its chunks: a
    resumable job longer than its partition's limit is a chain of jobs of that limit (``chunk_count``); any other
    job longer than the limit, or a chain whose jobs would train no minute, raises ``WalltimeError``."""
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
    """``job`` (named so in a ``WalltimeError``), of ``kind``, on ``gpus`` GPUs, needing ``minutes`` (``walltime``).
    At a site without GPUs it runs on the CPU partition with the CPU job limits: a training run whose ``minutes``
    were estimated as planned, any other job for the whole limit, its need not estimated."""
    where = placement(site, kind)
    if site.gpus_per_node == 0 and (not kind.resumable or minutes is None):
        limit = site.partition_limit_min(where.partition)
        return JobRequest(0, micro_batch, where, None, site.cpu_max_cpus, site.cpu_max_mem_mb, limit)
    granted, chunks = walltime(site, job, kind, minutes)
    if site.gpus_per_node == 0:
        return JobRequest(0, micro_batch, where, None, site.cpu_max_cpus, site.cpu_max_mem_mb, granted, minutes, chunks)
    cpus, mem_mb = site.cpus_per_gpu * gpus, site.mem_mb_per_gpu * gpus
    return JobRequest(gpus, micro_batch, where, site.gpu_model, cpus, mem_mb, granted, minutes, chunks)


def resource_names(site: Site | None, kind: JobKind) -> list[str]:
    """The names of the Snakemake resources each job of ``kind`` has (``JobRequest.resources``): ``gpu`` only
    without a site; with one, also placement and limits, ``gpu_model`` for GPU jobs where the site names one, and
    each sbatch option the site sets for the kind; ``micro_batch`` for training jobs, and their ``chunks`` at a
    site."""
    micro_batch = ["micro_batch"] if kind is JobKind.TRAINING else []
    if site is None:
        return ["gpu", *micro_batch]
    where = placement(site, kind)
    optional = {
        "slurm_account": where.account,
        "qos": where.qos,
        "constraint": where.constraint,
        "slurm_extra": where.flags(),
        "gpu_model": kind.on_gpu and site.gpus_per_node and site.gpu_model,
    }
    names = ["slurm_partition", "nodes", "gpu", "cpus_per_task", "mem_mb", "runtime", "needed_min"]
    chunks = ["chunks"] if kind.resumable else []
    return names + [name for name, value in optional.items() if value] + micro_batch + chunks
