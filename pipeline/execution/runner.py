"""Run a verb's heavy work as a Ray task: Snakemake decides what runs, Ray decides where (docs/cluster.md#ray).

``address=None`` starts an embedded Ray as ``address="local"`` (a bare ``ray.init()`` would join ``RAY_ADDRESS``
or the last ``ray start``, even a dead one); ``"auto"`` or ``host:port`` submits to an existing cluster, in a warm
worker unless ``fresh_process``. Too few GPUs or a dead address fail at once with a sentence (Ray would wait or
retry for minutes). The task's function is named ``"module:function"`` and imported in the worker only, so a
driver never imports JAX, Levanter or lm-eval."""

import logging
import os
import socket
from collections.abc import Callable
from functools import partial
from typing import Any

from pipeline.execution.errors import WarmWorkerLost
from pipeline.execution.local_ray import start_local_ray
from pipeline.execution.phases import mark_phase
from pipeline.execution.stop_signals import StopSignals
from pipeline.execution.warm_workers import (
    interrupt,
    marked_task,
    relay_job_output,
    start_worker,
    task_name,
    warm_pool,
    worker_key,
)

logger = logging.getLogger(__name__)


def run_on_ray(
    target: str,
    *args: Any,
    address: str | None,
    num_cpus: int | None = None,
    num_gpus: float = 0,
    uses_torch: bool = False,
    fresh_process: bool = False,
    **kwargs: Any,
) -> Any:
    """Execute ``target(*args, **kwargs)`` (``"module:function"``) as one Ray task and return its result; errors
    re-raise here. Ray's log de-duplication is off (it drops lines differing only in numbers). The task runs with
    ``job_env.task_env(uses_torch)``."""
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    import ray

    from pipeline.execution.job_env import task_env

    env_vars = task_env(uses_torch)
    init_args: dict[str, Any] = {"log_to_driver": True, "runtime_env": {"env_vars": env_vars}}
    if address is not None:
        require_ray_cluster_answers(address)
    mark_phase("ray")
    if address is None:
        start_local_ray(num_cpus, **init_args)
    else:
        ray.init(address=address, include_dashboard=False, **init_args)
    try:
        available = ray.cluster_resources().get("GPU", 0)
        if num_gpus > available:
            raise ValueError(
                f"{task_name(target)}: the job asks for {num_gpus:g} GPU(s) but the Ray cluster "
                f"({address or 'embedded local Ray'}) has {available:g}; run on a GPU node "
                f"or with --gpus 0."
            )
        if address is not None and not fresh_process:
            return run_in_warm_worker(target, args, kwargs, env_vars, num_gpus, address)
        if address is not None:
            ray.get(warm_pool().evict_idle.remote(num_gpus))
        task = ray.remote(num_cpus=1, num_gpus=num_gpus, max_retries=0)(marked_task(target))
        logger.info("Submitting %s to Ray (%s)", task_name(target), address or "embedded local Ray")
        ref = task.remote(*args, **kwargs)
        with cancel_on_stop_signals(lambda: ray.cancel(ref, force=False)):
            try:
                return ray.get(ref)
            except ray.exceptions.RayTaskError as error:
                logger.error("%s failed in its Ray task:\n%s", task_name(target), error)
                raise error.cause from None
    finally:
        # Marked here, not only by the task: a Ray worker's last log lines can be lost when Ray stops, and the stop
        # of an embedded Ray would then count as the task's last phase.
        mark_phase("shutdown")
        ray.shutdown()


def run_in_warm_worker(
    target: str, args: tuple, kwargs: dict, env_vars: dict[str, str], num_gpus: float, address: str
) -> Any:
    """``target(*args, **kwargs)`` in an idle warm worker of the job's settings, or a new one, its output relayed to
    this process's stderr and its exception raised here. A stop signal reaches the worker as SIGINT: from here on
    the same node, else by a zero-CPU task on its node."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    pool = warm_pool()
    name, worker = ray.get(pool.acquire.remote(worker_key(env_vars, num_gpus), num_gpus))
    if worker is None:
        worker = start_worker(name, env_vars, num_gpus)
        ray.get(pool.register.remote(name, worker))
    reusable = False
    try:
        pid, node = ray.get(worker.where.remote())
        logger.info("Submitting %s to Ray (%s), warm worker %s (process %d)", task_name(target), address, name, pid)
        if node == ray.get_runtime_context().get_node_id():
            stop = partial(interrupt, pid)
        else:
            on_node = NodeAffinitySchedulingStrategy(node, soft=False)
            stop = partial(ray.remote(num_cpus=0, scheduling_strategy=on_node)(interrupt).remote, pid)
        ref = worker.run.remote(target, args, kwargs, ray.get_runtime_context().get_job_id())
        with cancel_on_stop_signals(stop):
            try:
                succeeded, value = relay_job_output(pool, name, ref)
            except ray.exceptions.RayActorError:
                raise WarmWorkerLost(
                    f"{task_name(target)}: its warm Ray worker {name} (process {pid}) ended before the job did; "
                    "rerun the job (its checkpoints are kept)."
                ) from None
        if not succeeded:
            logger.error("%s failed in its warm Ray worker %s", task_name(target), name)
            raise value
        reusable = True
        return value
    finally:
        ray.get(pool.release.remote(name, reusable))


class RayAddressError(ValueError):
    """The Ray cluster a job was told to join does not answer at its address."""


RAY_CONNECT_TIMEOUT_S = 10.0
ADDRESS_SOURCE = (
    "--ray-address or $PIPELINE_RAY_ADDRESS: the preset's ray.address, or in a local run the Ray that "
    "Snakemake started for its jobs"
)


def require_ray_cluster_answers(address: str, timeout_s: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """An existing cluster's ``host:port`` (or Ray Client's ``ray://host:port``) must accept a TCP connection
    within ``timeout_s``; ``"auto"`` (Ray finds the cluster it started on this machine) is left to Ray."""
    if address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise RayAddressError(f"Ray address {address!r} ({ADDRESS_SOURCE}): expected 'auto' or host:port.")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as error:
        raise RayAddressError(
            f"no Ray cluster answers at {address} ({ADDRESS_SOURCE}): {error.strerror or error}; "
            "start that cluster (profiles/slurm/ray-cluster.sbatch) or fix ray.address (null: an "
            "embedded Ray in each job), or rerun the local snakemake whose Ray ended."
        ) from None


def cancel_on_stop_signals(cancel: Callable[[], Any]) -> StopSignals:
    """While waiting for a task: a job stop signal → ``cancel()`` once (SIGINT in the worker, which the loop turns
    into a checkpoint), then keep waiting. Replaces Ray's driver handler, which would exit and kill the worker
    mid-save."""

    def on_stop(signal_name: str) -> None:
        logger.warning("%s: asking the Ray task to save a checkpoint and stop", signal_name)
        cancel()

    return StopSignals(on_stop)
