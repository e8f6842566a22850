"""A new Ray runtime as the pipeline starts it (embedded, shared local, token-cache builder): no dashboard, no
metrics, no idle workers ahead of a task (docs/cluster.md#ray-on-this-machine). A cluster someone else started keeps
its settings: a job only joins it."""

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
