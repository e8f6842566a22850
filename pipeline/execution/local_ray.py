"""A new Ray runtime as the pipeline starts it (embedded, shared local, token-cache builder): no dashboard, no
metrics, no idle workers ahead of a task (docs/cluster.md#ray-on-this-machine). A cluster someone else started keeps
its settings: a job only joins it."""

from typing import Any

from pipeline.execution.job_env import slurm_allocation

LOCAL_RAY_SYSTEM_CONFIG = {"prestart_worker_first_driver": False, "enable_metrics_collection": False}
"""Ray's system settings of a Ray runtime the pipeline starts: no idle workers started for the first driver (one per
CPU, each importing Ray), no metrics recorded and exported."""


def start_local_ray(num_cpus: int | None = None, **options: Any):
    """``ray.init(address="local", ...)`` with ``options`` (``log_to_driver``, ``runtime_env``), no dashboard and
    ``LOCAL_RAY_SYSTEM_CONFIG``; inside a SLURM job its CPUs and GPUs, not the node's (``slurm_allocation``; a
    ``num_cpus`` given wins); returns Ray's context."""
    import ray

    allocation = {**slurm_allocation(), **({"num_cpus": num_cpus} if num_cpus else {})}
    config = dict(LOCAL_RAY_SYSTEM_CONFIG)
    return ray.init(address="local", include_dashboard=False, _system_config=config, **allocation, **options)
