"""Warm Ray workers: a job's Ray task runs in a long-lived worker process that already imported JAX, Levanter and
the models, instead of a new worker per job (Ray never reuses a worker across drivers, and every Snakemake job is its
own driver). Only a worker's first job pays the Ray worker's start and the imports
(``results/benchmarks/warm-2026-11-27.md``).

- ``WarmWorker``: a named, detached Ray actor that runs one job at a time (``run``), started with the job's Ray task
  environment (``FORWARDED_ENV``: XLA flags, the platform, the compilation cache, ...), its CPU and GPUs. The pool
  (``pipeline.execution.warm_pool``) keys workers by that environment and the GPU count: a job only ever runs in a
  worker started with the same process-level settings.
- The job runs on the actor's main thread, the only one where the training loop can catch a stop signal
  (``pipeline.train.loop.StopRequest``); the actor is therefore not threaded and answers no call while it runs.
- A job's stop signal (``pipeline.execution.stop_signals``) reaches the training loop as SIGINT to the worker's
  process (``interrupt``: sent by the job's driver on the same node, else by a zero-CPU task on the worker's node),
  which the worker unblocks while it runs a job: Ray's cancel of a running actor task only sets a flag and returns at
  once to the driver, which would then exit while the worker saves its checkpoint.
- The job's stdout and stderr (the phase markers, the training log, a traceback) go to a file, which a thread of the
  worker relays to the pool every ``RELAY_S`` and the job's driver writes to its own stderr, the job's log, as it
  runs (Ray forwards a detached actor's output to the driver that started it, not to the job it runs). When the
  driver has not taken the output for ``HEARTBEAT_S`` (killed with SIGKILL, by the OOM killer, with its node), the
  worker stops the job as a stop signal would (SIGINT: a checkpoint, then a clean stop) and, once the job ended,
  releases itself to the pool, which kills it: its CPU and GPUs are free again and nothing reuses it.
"""

from __future__ import annotations

import codecs
import importlib
import logging
import os
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from pipeline.execution.phases import mark_phase
from pipeline.execution.stop_signals import JOB_STOP_SIGNALS, TASK_STOP_SIGNAL
from pipeline.execution.warm_pool import NAMESPACE, warm_pool

RELAY_S = 1.0
"""How often a running job's new output travels from its worker to its driver (and the driver's heartbeat back)."""
HEARTBEAT_S = 30.0
"""A job whose driver has not taken its output for this long is stopped (SIGINT) and its worker recycled: long
enough for a driver that is merely slow on a loaded machine, short against the job itself."""


class WarmWorker:
    """One long-lived process, named ``name`` in the pool, that runs one job's ``"module:function"`` at a time."""

    def __init__(self, name: str):
        self.name = name

    def where(self) -> tuple[int, str]:
        """This process's id and its Ray node's id (where ``interrupt`` must run)."""
        import ray

        return os.getpid(), ray.get_runtime_context().get_node_id()

    def run(self, target: str, args: tuple, kwargs: dict) -> tuple[bool, Any, str]:
        """``(True, result, output)`` or ``(False, exception, output)``, ``output`` being what the job wrote that the
        driver has not taken yet. Any exception, ``KeyboardInterrupt`` (a stop signal outside the training loop)
        included. What a job changes of the process (``process_state``) is undone after it."""
        relay = relayed_output(self.name)
        try:
            with process_state(), relay:
                try:
                    mark_phase("task")
                    result = task_function(target)(*args, **kwargs)
                    mark_phase("shutdown")
                    outcome = (True, result)
                except BaseException as error:  # noqa: BLE001  (the job's failure goes back to its driver)
                    traceback.print_exc()
                    outcome = (False, error)
        finally:
            if relay.driver_lost:
                warm_pool().release.remote(self.name, False)
        return (*outcome, relay.rest)


class process_state:
    """The job stop signals unblocked while a job runs (a Ray actor's main thread blocks SIGINT: ``interrupt`` would
    never reach the training loop); on exit, the process-wide state a job may change put back: the environment, the
    working directory, the root logger's handlers and level (Levanter's ``initialize`` points them at the run's own
    log file, where a later job's lines must not go) and the signal mask."""

    def __enter__(self) -> None:
        self.blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, JOB_STOP_SIGNALS)
        self.environ = dict(os.environ)
        self.cwd = os.getcwd()
        self.handlers = list(logging.root.handlers)
        self.level = logging.root.level

    def __exit__(self, *exc) -> None:
        for handler in logging.root.handlers:
            if handler not in self.handlers:
                handler.close()
        logging.root.handlers[:] = self.handlers
        logging.root.setLevel(self.level)
        os.chdir(self.cwd)
        os.environ.clear()
        os.environ.update(self.environ)
        signal.pthread_sigmask(signal.SIG_SETMASK, self.blocked)


class relayed_output:
    """This process's file descriptors 1 and 2 (Python's and the native libraries' output alike) redirected to a
    temporary file while a job runs; a thread pushes the file's new text to the pool every ``RELAY_S`` and watches
    the driver's takes (``driver_lost``: none for ``HEARTBEAT_S``, the job was sent SIGINT). On exit the descriptors
    are restored and ``rest`` holds the text not pushed."""

    def __init__(self, name: str):
        self.name = name
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
        takes, heard = None, time.monotonic()
        while not self.ended.wait(RELAY_S):
            try:
                seen = ray.get(pool.push_output.remote(self.name, self._new_text()))
            except ray.exceptions.RayError:
                seen = takes
            if seen != takes:
                takes, heard = seen, time.monotonic()
            elif not self.driver_lost and not self.ended.is_set() and time.monotonic() - heard > HEARTBEAT_S:
                self.driver_lost = True
                message = (
                    f"warm worker {self.name}: the job's driver took no output for {HEARTBEAT_S:.0f} s (killed?); "
                    "stopping the job as a stop signal would (SIGINT), then recycling this worker\n"
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


def interrupt(pid: int) -> None:
    """SIGINT to the worker process ``pid`` on this node: the training loop saves a checkpoint and stops."""
    try:
        os.kill(pid, TASK_STOP_SIGNAL)
    except ProcessLookupError:
        pass


def start_worker(name: str, env_vars: dict[str, str], num_gpus: float) -> Any:
    """A new ``WarmWorker`` named ``name`` with the job's task environment, one CPU and ``num_gpus`` GPUs."""
    import ray

    return (
        ray.remote(WarmWorker)
        .options(
            name=name,
            namespace=NAMESPACE,
            lifetime="detached",
            num_cpus=1,
            num_gpus=num_gpus,
            max_restarts=0,
            runtime_env={"env_vars": env_vars},
        )
        .remote(name)
    )


def relay_job_output(pool: Any, name: str, ref: Any) -> tuple[bool, Any]:
    """Driver side: wait for the job ``ref`` running in worker ``name``, writing its output to this process's stderr
    (the job's log) as it comes, every ``RELAY_S``; each take is the heartbeat the worker watches. Returns whether
    the job succeeded and its result or exception."""
    import ray

    ended = False
    while not ended:
        ended = bool(ray.wait([ref], timeout=RELAY_S)[0])
        sys.stderr.write(ray.get(pool.take_output.remote(name)))
        sys.stderr.flush()
    succeeded, value, rest = ray.get(ref)
    sys.stderr.write(rest)
    sys.stderr.flush()
    return succeeded, value
