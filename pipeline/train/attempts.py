"""Which attempts of a training job train (docs/cluster.md#retries-after-a-real-failure): only attempt 1 (a new
``snakemake`` call, or the verb by hand), and a later one where the recorded attempt was stopped by a walltime or a
preemption, was killed after saving a newer checkpoint than it began from, or is this attempt itself (SLURM's
requeue); otherwise the attempt ends at once, repeating the first failure's sentence. Each attempt records in
``<run>/attempt.json`` its number, its run's newest complete checkpoint step when it began, and how it ended
(``stopped``, ``failed`` with its sentence and traceback, ``done``, or ``running`` while it runs and after a death
without a word).
"""

from __future__ import annotations

import contextlib
import json
import logging
import traceback
from collections.abc import Iterator
from pathlib import Path

from pipeline.artifacts import atomic_write_json
from pipeline.execution.errors import RunStopped, failure_sentence
from pipeline.train.checkpoints import checkpoint_step, complete_checkpoints

logger = logging.getLogger(__name__)

ATTEMPT_FILE = "attempt.json"


class AttemptRefused(ValueError):
    """A retry of a training job whose previous attempt failed for a reason another attempt does not fix."""


def newest_step(run_dir: Path) -> int:
    """The step of the run's newest complete checkpoint (0 without one)."""
    steps = [checkpoint_step(path) for path in complete_checkpoints(run_dir / "checkpoints")]
    return max(steps, default=0)


def refusal(record: dict, run_dir: Path, attempt: int, what: str) -> AttemptRefused | None:
    """Why attempt ``attempt`` must not train after the recorded one (module docstring); None: it trains."""
    if record["outcome"] in ("stopped", "done"):
        return None
    earlier = f"{what}, attempt {attempt}: not trained, as attempt {record['attempt']}"
    if record["outcome"] == "failed":
        return AttemptRefused(
            f"{earlier} failed and only a stop by walltime or preemption is retried (fix the cause, then run "
            f"snakemake again); attempt {record['attempt']} said: {record['sentence'].removeprefix('error: ')}"
        )
    if record["attempt"] == attempt or newest_step(run_dir) > record["from_step"]:
        return None
    return AttemptRefused(
        f"{earlier} ended without a sentence (killed: a lost node, the out-of-memory killer) and saved no checkpoint "
        f"after step {record['from_step']}; see its SLURM output, fix the cause, then run snakemake again."
    )


@contextlib.contextmanager
def recorded_attempt(run_dir: Path, attempt: int, what: str) -> Iterator[None]:
    """Attempt ``attempt`` of the training job ``what`` (``pipeline.execution.errors.subject``) of ``run_dir``:
    refused (``AttemptRefused``, after logging the recorded attempt's traceback) or recorded as it runs and ends."""
    path = run_dir / ATTEMPT_FILE
    if attempt > 1 and path.is_file():
        record = json.loads(path.read_text())
        refused = refusal(record, run_dir, attempt, what)
        if refused is not None:
            if record.get("traceback"):
                logger.error("attempt %d's traceback:\n%s", record["attempt"], record["traceback"])
            raise refused
    started = {"attempt": attempt, "from_step": newest_step(run_dir)}
    atomic_write_json(path, {**started, "outcome": "running"})
    try:
        yield
    except RunStopped:
        atomic_write_json(path, {**started, "outcome": "stopped", "step": newest_step(run_dir)})
        raise
    except Exception as error:
        sentence, with_traceback = failure_sentence(error, what)
        trace = "".join(traceback.format_exception(error)) if with_traceback else None
        atomic_write_json(path, {**started, "outcome": "failed", "sentence": sentence, "traceback": trace})
        raise
    atomic_write_json(path, {**started, "outcome": "done"})
