"""Run a verb's heavy work as a Ray task: Snakemake decides what runs, Ray decides where.

``address=None`` starts an embedded local Ray inside the job (a laptop, CI, or one SLURM job with its own
GPUs), explicitly ``address="local"``: a bare ``ray.init()`` would join the cluster named by ``RAY_ADDRESS``
or the last ``ray start`` on this machine, even a dead one. ``"auto"`` or ``host:port`` submits to an
existing cluster (for example one started across a SLURM allocation by ``profiles/slurm/ray-cluster.sbatch``).
The task asks Ray for the job's GPUs, so a cluster places it on a node that has them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

FORWARDED_ENV = ("HF_HUB_OFFLINE", "RAY_AUTH_MODE", "HF_DATASETS_OFFLINE", "HF_HOME", "JAX_PLATFORMS", "XLA_FLAGS",
                 "JAX_COMPILATION_CACHE_DIR", "PYTHONHASHSEED")


def run_on_ray(fn: Callable[..., Any], *args: Any, address: str | None, num_cpus: int | None = None,
               num_gpus: float = 0, **kwargs: Any) -> Any:
    """Execute ``fn(*args, **kwargs)`` as one Ray task and return its result; errors re-raise here. Ray's log
    de-duplication is off: it drops task log lines that differ only in numbers (e.g. per-shot summaries)."""
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    import ray

    env_vars = {name: os.environ[name] for name in FORWARDED_ENV if name in os.environ}
    init_args: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True,
                                 "runtime_env": {"env_vars": env_vars}}
    if address is None:
        from pipeline.site import slurm_allocation

        # Inside a SLURM job: the job's CPUs and GPUs, not the node's (an explicit num_cpus still wins).
        init_args.update({"address": "local", **slurm_allocation(), **({"num_cpus": num_cpus} if num_cpus else {})})
    else:
        init_args["address"] = address
    ray.init(**init_args)
    try:
        task = ray.remote(num_cpus=1, num_gpus=num_gpus, max_retries=0)(fn)
        logger.info("Submitting %s to Ray (%s)", fn.__name__, address or "embedded local Ray")
        try:
            return ray.get(task.remote(*args, **kwargs))
        except ray.exceptions.RayTaskError as error:
            logger.error("%s failed in its Ray task:\n%s", fn.__name__, error)
            raise error.cause from None
    finally:
        ray.shutdown()
