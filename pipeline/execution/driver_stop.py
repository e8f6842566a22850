"""How the local driver hosting the shared Ray stops on ``DRIVER_STOP_SIGNALS``
(docs/runs.md#stopping-the-local-driver): SIGTERM to every running job so each saves and stops, wait, shut down the
shared Ray, then the handler from before Ray (which releases Snakemake's lock). Ray's own handlers would abort at
once and kill every job mid-save."""

import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import psutil

from pipeline.execution.stop_signals import DRIVER_STOP_SIGNALS

logger = logging.getLogger(__name__)

JOB_STOP_WAIT_S = 600.0
"""How long the driver waits for its jobs to save and stop before it shuts Ray down under them."""


def child_processes(pid: int) -> set[int]:
    return {child.pid for child in psutil.Process(pid).children()}


def job_processes(driver: int, spared: set[int]) -> list[psutil.Process]:
    """The processes of the driver's running jobs: under each child of the driver not in ``spared`` (Ray's), its
    descendants, or the child itself when it has none (a shell that waits for its command is left to exit with it)."""
    roots = [child for child in psutil.Process(driver).children() if child.pid not in spared]
    jobs = []
    for root in roots:
        with contextlib.suppress(psutil.NoSuchProcess):
            jobs += root.children(recursive=True) or [root]
    return jobs


def running(process: psutil.Process) -> bool:
    """Whether ``process`` still runs: neither gone nor a zombie (exited, not yet reaped by its parent)."""
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_for_exit(processes: list[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """Wait until none of ``processes`` runs or ``timeout_s`` passes; the ones still running."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = [process for process in processes if running(process)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def stop_jobs_on_signals(previous: dict[int, Any], spared: set[int], shutdown: Callable[[], None]) -> None:
    """On SIGTERM or SIGINT: stop the driver's running jobs through their own stop path, wait for them, ``shutdown()``
    the shared Ray, then hand the signal to ``previous[signal]`` (the handlers from before Ray started)."""
    driver = os.getpid()

    def stop(number: int, frame: Any) -> None:
        for each in DRIVER_STOP_SIGNALS:
            signal.signal(each, signal.SIG_IGN)
        jobs = job_processes(driver, spared)
        logger.warning(
            "%s: stopping %d running job process(es), each through its own stop path (a training job saves "
            "a checkpoint first), then the shared Ray",
            signal.Signals(number).name,
            len(jobs),
        )
        for process in jobs:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.terminate()
        left = wait_for_exit(jobs, JOB_STOP_WAIT_S)
        if left:
            logger.warning(
                "%d job process(es) still ran after %.0f s: Ray stops under them", len(left), JOB_STOP_WAIT_S
            )
        shutdown()
        for each, handler in previous.items():
            signal.signal(each, handler)
        handler = previous[number]
        if callable(handler):
            handler(number, frame)
        elif handler == signal.SIG_DFL:
            os.kill(driver, number)

    for number in DRIVER_STOP_SIGNALS:
        signal.signal(number, stop)
