"""Phase markers in a job's log, ``phase <name> at <unix time>``, from which ``python -m pipeline bench dag`` splits
each job's wall time. The time is in the message so a line relayed from a Ray worker reads the same."""

import logging
import os
import re
import sys
import time

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""The CLI's log format (``pipeline.cli``); the markers' own handler uses it too."""

logger = logging.getLogger(__name__)
"""The markers' logger, with its own stderr handler at INFO: a Ray worker's root logger has no handler until
Levanter configures one, and then the markers would reach the log twice if they also propagated to it."""
_handler = logging.StreamHandler(sys.stderr)
_handler.setFormatter(logging.Formatter(LOG_FORMAT))
logger.addHandler(_handler)
logger.setLevel(logging.INFO)
logger.propagate = False

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
