"""The warm workers' pool (``pipeline.execution.warm_workers``): one named, detached, threaded Ray actor per Ray
cluster (``POOL_NAME``) that hands out idle workers of a key and says when to start a new one, and through which a
job's driver and its worker talk while the job runs.

- A worker is recycled (killed) after ``MAX_JOBS`` jobs, after a job that raised (a NaN loss, a stop, an interrupt:
  nothing of a failed job's state reaches the next), after a job whose driver went silent, and after ``IDLE_S``
  idle. Idle workers of other keys are killed when a job needs a new worker or a fresh process (``evict_idle``): a
  worker holds its CPU and GPUs while it lives, which would otherwise starve a job of another key.
- While a job runs, its worker pushes the job's new output here every second (``push_output``) and its driver
  takes it (``take_output``) and writes it to the job's log. Each take is the driver's heartbeat: the worker reads
  the count of takes back from each push and stops its job when the count stops moving (a driver killed with
  SIGKILL, by the OOM killer or with its node). The pool holds the messages, not the worker: a non-threaded actor
  (the worker must be one, ``pipeline.execution.warm_workers``) answers no call while it runs a job.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from typing import Any

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
    running job's output not yet taken and the count of its driver's takes. Threaded actor."""

    def __init__(self):
        self.lock = threading.Lock()
        self.workers: dict[str, dict[str, Any]] = {}
        threading.Thread(target=self._reap_idle, daemon=True).start()

    def acquire(self, key: str) -> tuple[str, Any]:
        """An idle worker of ``key`` (its name and handle, now busy), or the name for a new one (handle ``None``,
        to be started by the job and ``register``ed); idle workers of other keys are killed first."""
        with self.lock:
            for name, worker in self.workers.items():
                if worker["key"] == key and worker["idle_since"] is not None and worker["handle"] is not None:
                    worker.update(idle_since=None, output=[], takes=0)
                    return name, worker["handle"]
            idle = [self.workers.pop(name)["handle"] for name in self._idle()]
            name = f"worker-{key}-{uuid.uuid4().hex[:8]}"
            self.workers[name] = {"key": key, "handle": None, "jobs": 0, "idle_since": None, "output": [], "takes": 0}
        _kill(idle)
        return name, None

    def register(self, name: str, handle: Any) -> None:
        with self.lock:
            self.workers[name]["handle"] = handle

    def release(self, name: str, reusable: bool) -> None:
        """The job in worker ``name`` ended; the worker is kept idle if ``reusable`` and under ``MAX_JOBS``, else
        killed. A worker already released (by itself, when its driver went silent) is left as it is."""
        with self.lock:
            worker = self.workers.get(name)
            if worker is None:
                return
            worker["jobs"] += 1
            if reusable and worker["jobs"] < MAX_JOBS:
                worker.update(idle_since=time.monotonic(), output=[])
                return
            del self.workers[name]
        _kill([worker["handle"]])

    def push_output(self, name: str, text: str) -> int:
        """The worker ``name``'s job wrote ``text``; returns how often its driver took the output so far (-1: the
        worker was released)."""
        with self.lock:
            worker = self.workers.get(name)
            if worker is None:
                return -1
            if text:
                worker["output"].append(text)
            return worker["takes"]

    def take_output(self, name: str) -> str:
        """What the worker ``name``'s job wrote since the last take (the driver's heartbeat, counted)."""
        with self.lock:
            worker = self.workers.get(name)
            if worker is None:
                return ""
            worker["takes"] += 1
            text, worker["output"] = "".join(worker["output"]), []
            return text

    def evict_idle(self) -> int:
        """Kill every idle worker (a job about to run in a fresh process needs their CPUs); how many."""
        with self.lock:
            handles = [self.workers.pop(name)["handle"] for name in self._idle()]
        _kill(handles)
        return len(handles)

    def _idle(self, older_than_s: float = 0.0) -> list[str]:
        now = time.monotonic()
        return [
            name
            for name, worker in self.workers.items()
            if worker["idle_since"] is not None and now - worker["idle_since"] >= older_than_s
        ]

    def _reap_idle(self) -> None:
        while True:
            time.sleep(IDLE_S / 4)
            with self.lock:
                handles = [self.workers.pop(name)["handle"] for name in self._idle(older_than_s=IDLE_S)]
            _kill(handles)


def _kill(handles: list[Any]) -> None:
    import ray

    for handle in handles:
        if handle is not None:
            ray.kill(handle)


def warm_pool() -> Any:
    """The cluster's ``WarmPool`` actor, started by the first job that asks (zero CPUs, lives with the cluster)."""
    import ray

    return (
        ray.remote(WarmPool)
        .options(
            name=POOL_NAME,
            namespace=NAMESPACE,
            lifetime="detached",
            get_if_exists=True,
            num_cpus=0,
            max_concurrency=64,
        )
        .remote()
    )
