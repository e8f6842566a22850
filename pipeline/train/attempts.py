"""Which attempts of a training or data job run (docs/cluster.md#retries-after-a-real-failure): attempt 1, and a later
one only after a stop by walltime or preemption, a death after saving progress, or SLURM's requeue of the same
attempt; otherwise it ends at once, repeating the first failure's sentence. Records live in ``<run>/attempt.json``
or beside a data job's output (``data_attempt_file``)."""

import contextlib
import json
import logging
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

from pipeline.artifacts import atomic_write_json
from pipeline.execution.errors import RunStopped, failure_sentence
from pipeline.train.checkpoints import checkpoint_step, complete_checkpoints

logger = logging.getLogger(__name__)

ATTEMPT_FILE = "attempt.json"


class AttemptRefused(ValueError):
    """A retry of a job whose previous attempt failed for a reason another attempt does not fix."""


def data_attempt_file(out: Path) -> Path:
    """The attempt record of the data job writing ``out``: ``.<name>.attempt.json`` beside it."""
    return out.with_name(f".{out.name}.{ATTEMPT_FILE}")


def refusal(record: dict, progress: int, attempt: int, what: str, saved: str) -> AttemptRefused | None:
    """Why attempt ``attempt`` must not run after the recorded one, the job's ``progress`` now (module docstring);
    None: it runs. ``saved`` says what the job saves, with ``{}`` for the recorded attempt's progress."""
    if record["outcome"] in ("stopped", "done"):
        return None
    earlier = f"{what}, attempt {attempt}: not run, as attempt {record['attempt']}"
    if record["outcome"] == "failed":
        return AttemptRefused(
            f"{earlier} failed and only a stop by walltime or preemption is retried (fix the cause, then run "
            f"snakemake again); attempt {record['attempt']} said: {record['sentence'].removeprefix('error: ')}"
        )
    if record["attempt"] == attempt or progress > record["from_step"]:
        return None
    return AttemptRefused(
        f"{earlier} ended without a sentence (killed: a lost node, the out-of-memory killer) and saved no "
        f"{saved.format(record['from_step'])}; see its SLURM output, fix the cause, then run snakemake again."
    )


def recorded_attempt(run_dir: Path, attempt: int, what: str) -> contextlib.AbstractContextManager[None]:
    """Attempt ``attempt`` of the training job ``what`` of ``run_dir``, recorded in its ``attempt.json``
    (``attempt_record``), its progress the step of the run's newest complete checkpoint (0 without one)."""
    checkpoints = run_dir / "checkpoints"
    newest_step = lambda: max(map(checkpoint_step, complete_checkpoints(checkpoints)), default=0)  # noqa: E731
    return attempt_record(run_dir / ATTEMPT_FILE, attempt, what, newest_step)


@contextlib.contextmanager
def attempt_record(
    path: Path, attempt: int, what: str, progress: Callable[[], int], saved: str = "checkpoint after step {}"
) -> Iterator[None]:
    """Attempt ``attempt`` of job ``what``, recorded in ``path`` with ``progress()`` as what it saved: refused
    (``AttemptRefused``, after logging the recorded traceback) or recorded as it runs and ends."""
    if attempt > 1 and path.is_file():
        record = json.loads(path.read_text())
        refused = refusal(record, progress(), attempt, what, saved)
        if refused is not None:
            if record.get("traceback"):
                logger.error("attempt %d's traceback:\n%s", record["attempt"], record["traceback"])
            raise refused
    started = {"attempt": attempt, "from_step": progress()}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {**started, "outcome": "running"})
    try:
        yield
    except RunStopped:
        atomic_write_json(path, {**started, "outcome": "stopped", "step": progress()})
        raise
    except Exception as error:
        sentence, with_traceback = failure_sentence(error, what)
        trace = "".join(traceback.format_exception(error)) if with_traceback else None
        atomic_write_json(path, {**started, "outcome": "failed", "sentence": sentence, "traceback": trace})
        raise
    atomic_write_json(path, {**started, "outcome": "done"})
