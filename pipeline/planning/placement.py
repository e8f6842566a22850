"""Where and how long a job runs at a SLURM site, whatever the job: its partition and sbatch options
(``placement``), the walltime it is granted and the chain of jobs a resumable run longer than its partition's limit
takes (``walltime``, ``chunk_count``), and the request of a job of known GPUs and minutes (``site_request``): the
site's side of job sizing; ``pipeline.planning.jobs`` computes each job's GPUs and minutes
(docs/cluster.md#walltime-limits-and-chunks).

A job that cannot resume (data, fit, lm-eval, GPU analyses) and needs longer than its partition's limit raises
``WalltimeError`` naming the job, its estimate and the limit: nothing is clipped.
"""

from __future__ import annotations

import math

from pipeline.config.site import DEFAULT_CHUNK_STARTUP_MIN, Site
from pipeline.planning.job_request import JobKind, JobRequest, Placement

STARTUP_MIN = DEFAULT_CHUNK_STARTUP_MIN
"""The default of the site's ``chunk_startup_min``: minutes a training job spends before its first step and after
its last (JAX compilation, opening the token cache, loading or writing a checkpoint)."""
CHAIN_MARGIN_RETRIES = 2
"""Attempts a chain of training jobs gets beyond its chunks: for preemption, node loss and other transient failures
(the SLURM profile's ``retries`` for a job that fits one walltime)."""


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


def node_gpu_counts(batch_size: int, site: Site) -> list[int]:
    """The GPU counts a job on one node can use for data parallelism: those dividing ``batch_size``, ascending."""
    return [n for n in range(1, site.gpus_per_node + 1) if batch_size % n == 0]


def placement(site: Site, kind: JobKind) -> Placement:
    """Where jobs of ``kind`` run: GPU jobs on the GPU partition (on the CPU partition at a site without GPUs), with
    that partition's constraint, and the site's ``slurm_extra`` of the kind; a training job is sent SIGURG
    ``signal_lead_s`` before its walltime ends (at most half its walltime: ``pipeline.planning.job_request``), so
    that it saves a checkpoint and stops (``pipeline.execution.stop_signals``: SLURM signals every process of the
    job, and the embedded Ray's daemons would stop on SIGTERM mid-save but ignore SIGURG)."""
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


def walltime(site: Site, job: str, kind: JobKind, needed: int) -> tuple[int, int]:
    """The minutes granted to each SLURM job of ``job`` (of ``kind``) that needs ``needed`` minutes, and its chunks: a
    training job longer than its partition's limit is a chain of jobs of that limit (``chunk_count``); any other
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
    if site.gpus_per_node == 0:
        if not kind.resumable or minutes is None:
            limit = site.partition_limit_min(where.partition)
            return JobRequest(0, micro_batch, where, None, site.cpu_max_cpus, site.cpu_max_mem_mb, limit)
        granted, chunks = walltime(site, job, kind, minutes)
        return JobRequest(0, micro_batch, where, None, site.cpu_max_cpus, site.cpu_max_mem_mb, granted, minutes, chunks)
    granted, chunks = walltime(site, job, kind, minutes)
    return JobRequest(
        gpus,
        micro_batch,
        where,
        site.gpu_model,
        site.cpus_per_gpu * gpus,
        site.mem_mb_per_gpu * gpus,
        granted,
        minutes,
        chunks,
    )


def resource_names(site: Site | None, kind: JobKind) -> list[str]:
    """The names of the Snakemake resources each job of ``kind`` has (``JobRequest.resources``): ``gpu`` only
    without a site; with one, also placement and limits, ``gpu_model`` for GPU jobs where the site names one, and
    each sbatch option the site sets for the kind; ``micro_batch`` for training jobs, and their ``chunks`` at a
    site."""
    micro_batch = ["micro_batch"] if kind.resumable else []
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
