"""How the local driver process that hosts the shared Ray stops on SIGTERM or SIGINT (``timeout``, a closed terminal,
systemd, a login node's session reaper, ``scancel`` of a driver job, ``kill``).

Left to themselves, Ray's handlers in the driver exit at once (Ray's ``sigterm_handler``, then its C++ failure
handler aborts the process): the shared Ray dies with the driver and every running job's Ray task with it, before
any can save a checkpoint. Instead the driver, on the first of these signals:

1. sends SIGTERM to every running job's processes (each job's process tree under the driver, not Ray's, without
   the shell that waits for them), so each job takes its own stop path: a training job's Ray task saves a checkpoint
   at the current step and the job says it was stopped (``pipeline.execution.runner.cancel_on_stop_signals``);
2. waits for them to end (at most ``JOB_STOP_WAIT_S``);
3. shuts down the shared Ray;
4. hands the signal to the handler the driver had before Ray started (for Snakemake: SIGTERM stops scheduling and
   exits once no job runs; SIGINT raises ``KeyboardInterrupt``), which releases the working directory's lock.

Process trees are read from Linux's ``/proc``.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
JOB_STOP_WAIT_S = 600.0
"""How long the driver waits for its jobs to save and stop before it shuts Ray down under them."""


def process_table() -> dict[int, tuple[int, str]]:
    """Every process's parent id and state letter (``Z``: exited, not yet reaped), from ``/proc/<pid>/stat``."""
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            table[int(entry.name)] = (int(fields[1]), fields[0])
    return table


def descendants(table: dict[int, tuple[int, str]], pid: int) -> list[int]:
    children = [child for child, (parent, _) in table.items() if parent == pid]
    return [grandchild for child in children for grandchild in (child, *descendants(table, child))]


def child_processes(pid: int) -> set[int]:
    return {child for child, (parent, _) in process_table().items() if parent == pid}


def job_processes(driver: int, spared: set[int]) -> list[int]:
    """The processes of the driver's running jobs: under each child of the driver not in ``spared`` (Ray's), its
    descendants, or the child itself when it has none (a shell that waits for its command is left to exit with it)."""
    table = process_table()
    roots = [pid for pid, (parent, _) in table.items() if parent == driver and pid not in spared]
    return [pid for root in roots for pid in (descendants(table, root) or [root])]


def wait_for_exit(pids: list[int], timeout_s: float) -> list[int]:
    """Wait until none of ``pids`` runs (exited or a zombie) or ``timeout_s`` passes; the ones still running."""
    deadline = time.monotonic() + timeout_s
    while True:
        table = process_table()
        running = [pid for pid in pids if pid in table and table[pid][1] != "Z"]
        if not running or time.monotonic() > deadline:
            return running
        time.sleep(0.2)


def stop_jobs_on_signals(previous: dict[int, Any], spared: set[int], shutdown: Callable[[], None]) -> None:
    """On SIGTERM or SIGINT: stop the driver's running jobs through their own stop path, wait for them, ``shutdown()``
    the shared Ray, then hand the signal to ``previous[signal]`` (the handlers from before Ray started)."""
    driver = os.getpid()

    def stop(number: int, frame: Any) -> None:
        for each in STOP_SIGNALS:
            signal.signal(each, signal.SIG_IGN)
        jobs = job_processes(driver, spared)
        logger.warning(
            "%s: stopping %d running job process(es), each through its own stop path (a training job saves "
            "a checkpoint first), then the shared Ray",
            signal.Signals(number).name,
            len(jobs),
        )
        for pid in jobs:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
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

    for number in STOP_SIGNALS:
        signal.signal(number, stop)
