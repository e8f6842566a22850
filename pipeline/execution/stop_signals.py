"""The signals that stop a job or the local driver, and the one way a job takes them (``StopSignals``).

``JOB_STOP_SIGNALS`` (a checkpoint, then a stop): SIGTERM (``scancel``, ``kill``, the driver stopping its jobs),
SIGINT (``ray.cancel``, Ctrl-C) and SIGURG (SLURM's walltime warning, ``--signal=URG@<lead>``). SLURM signals every
process of the job; Ray's GCS server and raylet would die mid-save on SIGTERM but ignore SIGURG.

``DRIVER_STOP_SIGNALS`` are the same less SIGURG: the driver hands the signal on to Snakemake's handler, which
ignores SIGURG and would go on scheduling with the shared Ray shut down."""

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
