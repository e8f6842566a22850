"""A new Ray runtime on this machine, as the pipeline starts it: a job's embedded Ray, the shared Ray of a local DAG
run, the token-cache builder's. Nothing of the pipeline reads Ray's dashboard or metrics, and no job runs in an
idle worker that Ray starts ahead of a task (a warm worker is an actor, a process of its own; a fresh task's worker
is started for it), so these are off: a new local Ray starts no process that is never used, and idles on less CPU
(docs/cluster.md#ray-on-this-machine; measured in results/benchmarks/local-ray-2026-11-27.md).

A Ray cluster that someone else started (``ray start``, ``profiles/slurm/ray-cluster.sbatch``) keeps its own
settings: a job only joins it."""

from __future__ import annotations

from typing import Any

LOCAL_RAY_SYSTEM_CONFIG = {
    "prestart_worker_first_driver": False,
    "enable_metrics_collection": False,
}
"""Ray's system settings of a Ray runtime the pipeline starts: no idle workers started for the first driver (one per
CPU, each importing Ray), no metrics recorded and exported."""


def start_local_ray(**options: Any):
    """``ray.init(address="local", ...)`` with ``options`` (``num_cpus``, ``log_to_driver``, ``runtime_env``, a SLURM
    job's CPUs and GPUs), no dashboard and ``LOCAL_RAY_SYSTEM_CONFIG``; returns Ray's context."""
    import ray

    return ray.init(address="local", include_dashboard=False, _system_config=dict(LOCAL_RAY_SYSTEM_CONFIG), **options)
