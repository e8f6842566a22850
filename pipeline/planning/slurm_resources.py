"""A job's request (``pipeline.planning.job_request.JobRequest``) as the resources of a Snakemake rule: the names
Snakemake and snakemake-executor-plugin-slurm read (``slurm_partition``, ``cpus_per_task``, ``mem_mb``, ``runtime``,
...), plus the pipeline's own (``micro_batch``, ``needed_min``, ``chunks``) that a rule's shell command reads."""

from __future__ import annotations

import dataclasses

from pipeline.planning.job_request import JobKind, JobRequest
from pipeline.planning.jobs import JobSizing


def resource_names(kind: JobKind, sizing: JobSizing) -> list[str]:
    """The names of the resources each job of ``kind`` has: ``gpu`` only without a site; with one, also placement
    and limits, ``gpu_model`` for GPU jobs where the site names one, and each sbatch option the site sets for the
    kind; ``micro_batch`` for training jobs, and their ``chunks`` at a site."""
    micro_batch = ["micro_batch"] if kind.resumable else []
    site = sizing.site
    if site is None:
        return ["gpu", *micro_batch]
    placement = sizing.placement(kind)
    optional = {
        "slurm_account": placement.account,
        "qos": placement.qos,
        "constraint": placement.constraint,
        "slurm_extra": placement.flags(),
        "gpu_model": kind.on_gpu and site.gpus_per_node and site.gpu_model,
    }
    names = ["slurm_partition", "nodes", "gpu", "cpus_per_task", "mem_mb", "runtime", "needed_min"]
    chunks = ["chunks"] if kind.resumable else []
    return names + [name for name, value in optional.items() if value] + micro_batch + chunks


def resource_values(shape: JobRequest) -> dict:
    """A job's shape under Snakemake's and the SLURM executor plugin's names (one node; ``needed_min`` the job's own
    estimate, else its walltime)."""
    values = {"gpu": shape.gpus, "micro_batch": shape.micro_batch}
    if shape.placement is not None:
        values |= {
            "slurm_partition": shape.placement.partition,
            "slurm_account": shape.placement.account,
            "qos": shape.placement.qos,
            "constraint": shape.placement.constraint,
            "slurm_extra": " ".join(shape.sbatch_flags),
            "nodes": 1,
            "gpu_model": shape.gpu_model,
            "cpus_per_task": shape.cpus,
            "mem_mb": shape.mem_mb,
            "runtime": shape.minutes,
            "needed_min": shape.minutes if shape.needed_minutes is None else shape.needed_minutes,
            "chunks": shape.chunks,
        }
    return values


def preflight_walltime(shape: JobRequest, minutes: int) -> JobRequest:
    """A preflight job's shape: the job it stands for, granted ``minutes`` in one chunk (its need: those minutes);
    without a site (no walltime) the job's shape as it is."""
    if shape.minutes is None:
        return shape
    return dataclasses.replace(shape, minutes=minutes, needed_minutes=minutes, chunks=1)
