"""A long CPU job's progress in its log: ``<what>: <unit> done of <total> (<percent>), ETA <duration>``, at most
every ``every_s`` seconds and at the last unit. ETA = (total − done) × elapsed / (done − done at start): units a
resumed job found done do not count in its rate."""

import logging
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)


def duration(seconds: float) -> str:
    """``seconds`` as seconds below a minute, minutes below an hour, else hours."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 3600 else f"{seconds / 3600:.1f} h"


class Progress:
    """Counts ``unit`` done of ``total`` for ``what`` (``done`` of them before this process started)."""

    def __init__(
        self,
        what: str,
        total: int,
        unit: str,
        *,
        done: int = 0,
        every_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.what, self.total, self.unit, self.every_s, self.clock = what, total, unit, every_s, clock
        self.done = self.start_done = done
        self.started = self.logged = clock()
        if done:
            logger.info("%s: resuming with %s %d of %d done", what, unit, done, total)

    def eta_s(self) -> float | None:
        """Seconds left at this process's rate so far; None before its first unit."""
        made = self.done - self.start_done
        return (self.total - self.done) * (self.clock() - self.started) / made if made > 0 else None

    def advance(self, count: int = 1, note: str = "") -> None:
        """``count`` more units done; ``note`` is appended to the line (e.g. the shard just written)."""
        self.done += count
        now = self.clock()
        if now - self.logged < self.every_s and self.done < self.total:
            return
        self.logged = now
        eta = self.eta_s()
        logger.info(
            "%s: %s %d of %d done (%.1f %%)%s, ETA %s",
            self.what,
            self.unit,
            self.done,
            self.total,
            100 * self.done / max(self.total, 1),
            f", {note}" if note else "",
            "unknown" if eta is None else duration(eta),
        )
