"""Phase markers in a job's log: one line ``phase <name> at <unix time>`` where a phase of a job begins.

A phase lasts until the next marker; ``python -m pipeline bench dag`` reads the markers back from every job's log
and splits each job's wall time by phase. The time is in the message itself, so a line forwarded from a Ray
worker (with Ray's own prefix) reads the same as one from the driver.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""The CLI's log format (``pipeline.cli``); the markers' own handler uses it too."""


def _marker_logger() -> logging.Logger:
    """The markers' logger, with its own stderr handler at INFO: a Ray worker's root logger has no handler until
    Levanter configures one, and then the markers would reach the log twice if they also propagated to it."""
    marker_logger = logging.getLogger(__name__)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    marker_logger.addHandler(handler)
    marker_logger.setLevel(logging.INFO)
    marker_logger.propagate = False
    return marker_logger


logger = _marker_logger()

MARKER = re.compile(r"\bphase (?P<name>[a-z][a-z-]*) at (?P<time>\d+(?:\.\d+)?)\b")


def mark_phase(name: str, at: float | None = None) -> None:
    """Log that phase ``name`` begins now (or at unix time ``at``)."""
    logger.info("phase %s at %.3f", name, time.time() if at is None else at)


def process_start_time() -> float:
    """Unix time this process started: its start in clock ticks after boot (``/proc/self/stat``, field 22) set
    against ``CLOCK_BOOTTIME``; where there is no ``/proc``, now."""
    try:
        fields = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return time.time()
    started_after_boot = int(fields[19]) / os.sysconf("SC_CLK_TCK")
    return time.time() - (time.clock_gettime(time.CLOCK_BOOTTIME) - started_after_boot)
