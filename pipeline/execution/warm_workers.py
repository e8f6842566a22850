"""Warm Ray workers (docs/cluster.md#warm-workers): a job's Ray task runs in a long-lived worker that already
imported JAX and Levanter (Ray never reuses a worker across drivers, and every Snakemake job is its own driver).

- ``WarmPool``: one named, detached, threaded actor that hands out idle workers by key (``FORWARDED_ENV`` and GPU
  count) and recycles them; the driver and its worker talk through it.
- ``WarmWorker``: runs one job at a time on its main thread, the only one where the loop can catch a stop signal.
  A stop reaches it as SIGINT (``interrupt``): Ray's cancel of a running actor task returns at once, and the
  driver would exit while the worker saves its checkpoint.
- Output is relayed through the pool every ``RELAY_S`` (Ray forwards a detached actor's output to the driver that
  started it, not the job's). A worker whose driver's Ray job has ended (the GCS records a driver's exit, SIGKILL
  and a lost node included) stops its job as a stop signal would.

Longer than 300 lines because the pool, the worker and the driver's side are one protocol (the output relay, the
driver's end, recycling), whose three parts are read and changed together."""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import importlib
import json
import logging
import os
import signal
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from pipeline.execution.errors import RunStopped, error_chain
from pipeline.execution.phases import mark_phase
from pipeline.execution.stop_signals import JOB_STOP_SIGNALS, TASK_STOP_SIGNAL

NAMESPACE = "pipeline-warm-workers"
POOL_NAME = "pool"
MAX_JOBS = 25
"""Jobs a worker runs before it is replaced (bounds what its caches and Python heap can grow to)."""
IDLE_S = 120.0
"""A worker idle this long is killed, so that a finished DAG leaves no worker holding an existing cluster's CPUs."""


def worker_key(env_vars: dict[str, str], num_gpus: float) -> str:
    """The process-level settings a worker was started with, as a short digest: its task environment and GPUs."""
    settings = json.dumps({"env": env_vars, "gpus": num_gpus}, sort_keys=True)
    return hashlib.sha256(settings.encode()).hexdigest()[:16]


class WarmPool:
    """The cluster's warm workers by name: key, handle, jobs run, idle since when (``None``: running a job), and the
    running job's output not yet taken. Threaded actor."""

    def __init__(self):
        self.lock = threading.Lock()
        self.workers: dict[str, dict[str, Any]] = {}
        threading.Thread(target=self._reap_idle, daemon=True).start()

    def acquire(self, key: str, gpus: float) -> tuple[str, Any]:
        """An idle worker of ``key`` (its name and handle, now busy), or the name for a new one of ``gpus`` GPUs
        (handle ``None``, to be started by the job and ``register``ed), for which idle workers make room first."""
        cluster = _cluster_resources()
        with self.lock:
            for name, worker in self.workers.items():
                if worker["key"] == key and worker["idle_since"] is not None and worker["handle"] is not None:
                    worker.update(idle_since=None, output=[])
                    return name, worker["handle"]
            idle = self._pop_idle(lambda: self._fits(cluster, gpus))
            name = f"worker-{key}-{uuid.uuid4().hex[:8]}"
            self.workers[name] = dict(key=key, gpus=gpus, handle=None, jobs=0, idle_since=None, output=[])
        _kill(idle)
        return name, None

    def register(self, name: str, handle: Any) -> None:
        with self.lock:
            self.workers[name]["handle"] = handle

    def release(self, name: str, reusable: bool) -> None:
        """The job in worker ``name`` ended; the worker is kept idle if ``reusable`` (the job succeeded: nothing of a
        failed job's state reaches the next), under ``MAX_JOBS`` and no new worker waits for its CPU or GPUs, else
        killed. A worker already released (by itself, when its driver went silent) is left as it is."""
        cluster = _cluster_resources()
        with self.lock:
            worker = self.workers.get(name)
            if worker is None:
                return
            worker["jobs"] += 1
            if reusable and worker["jobs"] < MAX_JOBS and self._fits(cluster, 0, cpus=0):
                worker.update(idle_since=time.monotonic(), output=[])
                return
            del self.workers[name]
        _kill([worker["handle"]])

    def push_output(self, name: str, text: str) -> None:
        """The worker ``name``'s job wrote ``text`` (dropped once the worker was released)."""
        with self.lock:
            worker = self.workers.get(name)
            if worker is not None and text:
                worker["output"].append(text)

    def take_output(self, name: str) -> str:
        """What the worker ``name``'s job wrote since the last take."""
        with self.lock:
            worker = self.workers.get(name)
            if worker is None:
                return ""
            text, worker["output"] = "".join(worker["output"]), []
            return text

    def evict_idle(self, gpus: float) -> int:
        """Kill the oldest idle workers until a fresh-process task of one CPU and ``gpus`` GPUs fits; how many."""
        cluster = _cluster_resources()
        with self.lock:
            handles = self._pop_idle(lambda: self._fits(cluster, gpus))
        _kill(handles)
        return len(handles)

    def _fits(self, cluster: dict[str, float], gpus: float, cpus: int = 1) -> bool:
        """Whether ``cpus`` more CPUs and ``gpus`` more GPUs fit in the ``cluster``'s beside the pool's workers (one CPU
        and their job's GPUs each: busy, idle or starting). Cluster-wide, not per node: good enough (lock held)."""
        gpus += sum(worker["gpus"] for worker in self.workers.values())
        return len(self.workers) + cpus <= cluster.get("CPU", 0) and gpus <= cluster.get("GPU", 0)

    def _pop_idle(self, fits: Callable[[], bool] = lambda: False, older_than_s: float = 0.0) -> list[Any]:
        """Handles of the workers idle ``older_than_s`` or longer, oldest first, popped until ``fits()`` (lock held)."""
        now = time.monotonic()
        idle = sorted((w["idle_since"], name) for name, w in self.workers.items() if w["idle_since"] is not None)
        handles = []
        while idle and not fits() and now - idle[0][0] >= older_than_s:
            handles.append(self.workers.pop(idle.pop(0)[1])["handle"])
        return handles

    def _reap_idle(self) -> None:
        while True:
            time.sleep(IDLE_S / 4)
            with self.lock:
                handles = self._pop_idle(older_than_s=IDLE_S)
            _kill(handles)


def _cluster_resources() -> dict[str, float]:
    import ray

    return ray.cluster_resources()


def _kill(handles: list[Any]) -> None:
    import ray

    for handle in handles:
        if handle is not None:
            ray.kill(handle)


def detached_actor(actor: type, name: str, *args: Any, **options: Any) -> Any:
    """A new named, detached Ray actor of class ``actor`` in ``NAMESPACE``, started with ``options``."""
    import ray

    return ray.remote(actor).options(name=name, namespace=NAMESPACE, lifetime="detached", **options).remote(*args)


def warm_pool() -> Any:
    """The cluster's ``WarmPool`` actor, started by the first job that asks (zero CPUs, lives with the cluster)."""
    return detached_actor(WarmPool, POOL_NAME, get_if_exists=True, num_cpus=0, max_concurrency=64)


RELAY_S = 1.0
"""How often a running job's new output travels from its worker to its driver, and the worker asks whether the driver
still runs (``driver_ended``)."""


def driver_ended(job_id: str) -> bool:
    """Whether the GCS records the Ray job ``job_id`` (a job's driver) as ended, as it does within a second of the
    driver's exit (SIGKILL and the OOM killer included) and once it declares the driver's node dead; False where it
    cannot answer."""
    import ray
    from ray._private.worker import global_worker

    try:
        jobs = global_worker.gcs_client.get_all_job_info(
            job_or_submission_id=job_id,
            skip_submission_job_info_field=True,
            skip_is_running_tasks_field=True,
            timeout=10,
        )
    except (ray.exceptions.RayError, ConnectionError, TimeoutError):
        return False
    return any(job.is_dead for job in jobs.values())


class WarmWorker:
    """One long-lived process, named ``name`` in the pool, that runs one job's ``"module:function"`` at a time."""

    def __init__(self, name: str):
        self.name = name

    def where(self) -> tuple[int, str]:
        """This process's id and its Ray node's id (where ``interrupt`` must run)."""
        import ray

        return os.getpid(), ray.get_runtime_context().get_node_id()

    def run(self, target: str, args: tuple, kwargs: dict, driver_job: str) -> tuple[bool, Any, str]:
        """``(True, result, output)`` or ``(False, exception, output)``, ``output`` being what the job wrote that the
        driver (Ray job ``driver_job``) has not taken yet. Any exception, ``KeyboardInterrupt`` (a stop signal outside
        the training loop) included. What a job changes of the process (``process_state``) is undone after it."""
        relay = relayed_output(self.name, driver_job)
        try:
            with process_state(), relay:
                try:
                    outcome = (True, marked_task(target)(*args, **kwargs))
                except BaseException as error:  # noqa: BLE001  (the job's failure goes back to its driver)
                    traceback.print_exc()
                    outcome = (False, error)
        finally:
            if relay.driver_lost:
                warm_pool().release.remote(self.name, False)
        return (*outcome, relay.rest)


@contextlib.contextmanager
def process_state() -> Iterator[None]:
    """Job stop signals unblocked while a job runs (a Ray actor's main thread blocks SIGINT); on exit, the process
    state a job may change restored: environment, working directory, root logger handlers and level (Levanter points
    them at the run's log) and the signal mask."""
    blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, JOB_STOP_SIGNALS)
    environ, cwd, handlers, level = dict(os.environ), os.getcwd(), list(logging.root.handlers), logging.root.level
    try:
        yield
    finally:
        for handler in logging.root.handlers:
            if handler not in handlers:
                handler.close()
        logging.root.handlers[:] = handlers
        logging.root.setLevel(level)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(environ)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


class relayed_output:
    """Descriptors 1 and 2 redirected to a temporary file while a job runs; a thread pushes its new text to the pool
    every ``RELAY_S`` and sends the job SIGINT once the driver's Ray job ``driver_job`` ended. ``rest``: the text not
    pushed."""

    def __init__(self, name: str, driver_job: str):
        self.name, self.driver_job = name, driver_job
        self.rest = ""

    def __enter__(self) -> relayed_output:
        sys.stdout.flush()
        sys.stderr.flush()
        self.file = tempfile.TemporaryFile(mode="w+b")
        self.saved = {fd: os.dup(fd) for fd in (1, 2)}
        for fd in (1, 2):
            os.dup2(self.file.fileno(), fd)
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.offset = 0
        self.driver_lost = False
        self.ended = threading.Event()
        self.thread = threading.Thread(target=self._relay, daemon=True)
        self.thread.start()
        return self

    def _new_text(self) -> str:
        data = os.pread(self.file.fileno(), 1 << 24, self.offset)
        self.offset += len(data)
        return self.decoder.decode(data)

    def _relay(self) -> None:
        import ray

        pool = warm_pool()
        while not self.ended.wait(RELAY_S):
            with contextlib.suppress(ray.exceptions.RayError):
                ray.get(pool.push_output.remote(self.name, self._new_text()))
            if not self.driver_lost and not self.ended.is_set() and driver_ended(self.driver_job):
                self.driver_lost = True
                message = (
                    f"warm worker {self.name}: the job's driver ended (Ray job {self.driver_job}, killed?); stopping "
                    "the job as a stop signal would (SIGINT), then recycling this worker\n"
                )
                os.write(self.saved[2], message.encode())
                os.write(self.file.fileno(), message.encode())
                os.kill(os.getpid(), TASK_STOP_SIGNAL)

    def __exit__(self, *exc) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        self.ended.set()
        self.thread.join()
        for fd, saved in self.saved.items():
            os.dup2(saved, fd)
            os.close(saved)
        self.rest = self._new_text() + self.decoder.decode(b"", final=True)
        self.file.close()


def task_function(target: str) -> Callable[..., Any]:
    """The function a ``"module:function"`` name refers to (its module imported here)."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def task_name(target: str) -> str:
    """The function's name for log lines and errors: ``"pipeline.train.runs:pretrain"`` → ``pretrain``."""
    return target.rpartition(":")[2]


def marked_task(target: str) -> Callable[..., Any]:
    """``target`` resolved and called in its Ray worker, logging the phase markers ``task`` when it starts there
    (before the import of the function's module) and ``shutdown`` when it returns. A job asked to stop twice (SLURM's
    walltime warning reaches every process of the job, its worker and its driver, and the driver asks the task to
    stop as well: SIGINT) ends with the stop it took (``RunStopped``), not with the interruption that the second
    request raises while that stop unwinds."""

    def task(*args: Any, **kwargs: Any) -> Any:
        mark_phase("task")
        try:
            result = task_function(target)(*args, **kwargs)
        except KeyboardInterrupt as interrupt:
            stopped = next((error for error in error_chain(interrupt) if isinstance(error, RunStopped)), None)
            if stopped is None:
                raise
            raise stopped from None
        mark_phase("shutdown")
        return result

    task.__name__ = task.__qualname__ = task_name(target)
    return task


def interrupt(pid: int) -> None:
    """SIGINT to the worker process ``pid`` on this node: the training loop saves a checkpoint and stops."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, TASK_STOP_SIGNAL)


def start_worker(name: str, env_vars: dict[str, str], num_gpus: float) -> Any:
    """A new ``WarmWorker`` named ``name`` with the job's task environment, one CPU and ``num_gpus`` GPUs."""
    options = {"num_cpus": 1, "num_gpus": num_gpus, "max_restarts": 0, "runtime_env": {"env_vars": env_vars}}
    return detached_actor(WarmWorker, name, name, **options)


def relay_job_output(pool: Any, name: str, ref: Any) -> tuple[bool, Any]:
    """Driver side: wait for the job ``ref`` running in worker ``name``, writing its output to this process's stderr
    (the job's log) as it comes, every ``RELAY_S``. Returns whether the job succeeded and its result or exception."""
    import ray

    ended = False
    while not ended:
        ended = bool(ray.wait([ref], timeout=RELAY_S)[0])
        print(ray.get(pool.take_output.remote(name)), end="", file=sys.stderr, flush=True)
    succeeded, value, rest = ray.get(ref)
    print(rest, end="", file=sys.stderr, flush=True)
    return succeeded, value
