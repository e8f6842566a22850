"""What a failed verb tells its user: one sentence per class of failure, the last line of its log
(docs/failures.md#failures-inside-a-job), after the traceback on stderr where it helps. Classes are matched anywhere
in the exception's chain, in ``failure_sentence``'s order."""

import argparse
import errno
import re
import sys
from collections.abc import Iterator
from pathlib import Path

RAY_CRASHES = ("WorkerCrashedError", "NodeDiedError", "LocalRayletDiedError", "ActorDiedError", "ObjectLostError")
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
PACKAGE_DIR = str(Path(__file__).resolve().parents[1])
"""The ``pipeline`` package's folder: an error raised by code under it carries a sentence written for users."""


class RunStopped(Exception):
    """A run or a data job stopped because it was asked to (SIGTERM, SLURM's walltime warning, a cancelled Ray task),
    after saving what it had done (a checkpoint; finished shards: ``pipeline.data.shards``)."""


class WarmWorkerLost(RuntimeError):
    """A job's warm worker died under it: killed, out of memory, or recycled because the driver went silent."""


STOPPED_AT = re.compile(r"stopped on request \((\w+):.*\) after (\d+) of (\d+) (?:updates|shards)")
"""A stopped job's sentence: the signal, and the updates done of the run's (``pipeline.train.loop``) or the shards
done of the data job's (``pipeline.data.shards``)."""


def error_chain(error: BaseException) -> Iterator[BaseException]:
    """The error and the errors it was raised from or while handling."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def _ray_error(error: BaseException, names: tuple[str, ...]) -> bool:
    exceptions = sys.modules.get("ray.exceptions")
    return exceptions is not None and any(isinstance(error, getattr(exceptions, name)) for name in names)


def _raised_by_pipeline(error: BaseException) -> bool:
    """Whether the innermost frame of ``error``'s traceback is this package's code (a sentence written for users)."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_filename.startswith(PACKAGE_DIR)


def subject(verb: str, args: argparse.Namespace) -> str:
    """The verb and what it works on: its run folder, else its output, else its preset."""
    for name in ("run_dir", "out_dir", "out", "preset"):
        value = getattr(args, name, None)
        if value:
            return f"`{verb}` for {value}"
    return f"`{verb}`"


def failure_sentence(error: BaseException, what: str) -> tuple[str, bool]:
    """One sentence for ``error`` raised by ``what`` (see ``subject``), and whether its traceback belongs in the log
    before it (not for the sentences the pipeline raises itself)."""
    for cause in error_chain(error):
        if isinstance(cause, MemoryError) or _ray_error(cause, ("OutOfMemoryError",)):
            return (
                f"error: {what} ran out of host memory ({type(cause).__name__}); give the job more memory "
                f"(the rule's mem_mb resource or a larger node) or lower the batch or problem size, then rerun; "
                f"the traceback is in the job log."
            ), True
        if "RESOURCE_EXHAUSTED" in str(cause):
            return (
                f"error: {what} ran out of accelerator memory (XLA RESOURCE_EXHAUSTED); lower batch_size or give "
                f"it more or larger GPUs (the rule's gpu resource), then rerun; the traceback is in the job "
                f"log."
            ), True
        if isinstance(cause, WarmWorkerLost) or _ray_error(cause, RAY_CRASHES):
            return (
                f"error: the Ray worker running {what} died ({type(cause).__name__}: its process was killed, "
                f"e.g. by the kernel's out-of-memory killer, or its node went away); see the job log and Ray's "
                f"logs (/tmp/ray/session_latest/logs on the worker's node), then rerun: training resumes from "
                f"its newest checkpoint."
            ), True
        if (isinstance(cause, OSError) and cause.errno in DISK_FULL) or "No space left on device" in str(cause):
            where = getattr(cause, "filename", None) or "its output"
            return (
                f"error: the disk is full: {what} could not write {where}; free space (or quota) on that file "
                f"system or move results/ to a larger one, then rerun."
            ), True
    if isinstance(error, RunStopped):
        return f"error: {error}", False
    if isinstance(error, (ValueError, FileNotFoundError)):
        return f"error: {error}", not _raised_by_pipeline(error)
    first_line = (str(error).strip().splitlines() or [""])[0][:300]
    return (
        f"error: {what} failed unexpectedly ({type(error).__name__}: {first_line}); the traceback above in the "
        f"job log shows where; this is a bug in the pipeline, please report it."
    ), True
