"""The signals that stop a job or the local driver, and the one way a job takes them (``StopSignals``).

A job (its driver process and its training task) stops, saving a checkpoint first, on ``JOB_STOP_SIGNALS``:

- SIGTERM: ``scancel``, ``kill``, the local driver stopping its jobs (``pipeline.execution.driver_stop``);
- SIGINT: Ray's cancel of a running task (``ray.cancel``), Ctrl-C;
- SIGURG: SLURM's walltime warning (``profiles/slurm`` submits every job with ``--signal=URG@<lead seconds>``). SLURM
  sends it to every process of the job's step, the embedded Ray's GCS server and raylet included. Those two stop on
  SIGTERM (and would take the training worker down mid-save) but, like any process without a handler, ignore
  SIGURG: only the job's driver and its training task, which handle it, react.

The local driver that hosts the shared Ray (``pipeline.execution.driver_stop``) stops on ``DRIVER_STOP_SIGNALS``, the
same less SIGURG, on purpose: SIGURG is a warning to a job, which each job that gets it takes itself, and after
stopping its jobs the driver hands the signal on to Snakemake's handler, for which SIGURG's default is to ignore it:
Snakemake would go on scheduling jobs with the shared Ray shut down.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

JOB_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGURG)
DRIVER_STOP_SIGNALS = tuple(number for number in JOB_STOP_SIGNALS if number != signal.SIGURG)
TASK_STOP_SIGNAL = signal.SIGINT
"""What asks a running Ray task to save a checkpoint and stop: the signal ``ray.cancel`` raises in its worker, and
the one a warm worker is sent (``pipeline.execution.warm_workers.interrupt``)."""


class StopSignals:
    """While inside: the first job stop signal sets ``signal_name`` (``"SIGTERM"``, ...) and calls
    ``on_stop(signal_name)``; the ones after it are ignored. Leaving restores the handlers from before. Python runs
    signal handlers in the main thread only, so outside it this does nothing."""

    def __init__(self, on_stop: Callable[[str], None] | None = None):
        self.on_stop = on_stop
        self.signal_name: str | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            self._previous = {number: signal.signal(number, self._handle) for number in JOB_STOP_SIGNALS}
        return self

    def _handle(self, number: int, frame: Any) -> None:
        for each in JOB_STOP_SIGNALS:
            signal.signal(each, signal.SIG_IGN)
        self.signal_name = signal.Signals(number).name
        if self.on_stop is not None:
            self.on_stop(self.signal_name)

    def __exit__(self, *exc: object) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
