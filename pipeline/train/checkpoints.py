"""Which of a run's checkpoints are kept, how each is verified against its ``checksums.json``, and how one that
cannot be resumed is moved to ``<run>/unreadable-checkpoints/`` (docs/runs.md#checkpoints-resume-and-stopping-a-run)."""

import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pipeline.artifacts import atomic_write_text, folder_bytes
from pipeline.data.files import sha256_file

logger = logging.getLogger(__name__)

METADATA_FILE = "metadata.json"
CHECKSUMS_FILE = "checksums.json"
UNREADABLE_DIR = "unreadable-checkpoints"
KEPT_WHILE_TRAINING = 2
"""Complete checkpoints a running run keeps (the newest may be the bad one)."""

State = TypeVar("State")


def checkpoint_step(path: Path) -> int:
    return int(path.name.removeprefix("step-"))


def complete_checkpoints(checkpoints: Path) -> list[Path]:
    """The ``step-N`` folders with Levanter's ``metadata.json``, oldest first."""
    return sorted((path.parent for path in checkpoints.glob(f"step-*/{METADATA_FILE}")), key=checkpoint_step)


def file_checksums(checkpoint: Path) -> dict[str, str]:
    """SHA-256 of every file of ``checkpoint`` but its checksums file, by path relative to it."""
    sums = {}
    for path in sorted(checkpoint.rglob("*")):
        if path.is_file() and path.name != CHECKSUMS_FILE:
            sums[str(path.relative_to(checkpoint))] = sha256_file(path)
    return sums


def write_checksums(checkpoint: Path) -> None:
    """Record ``checkpoint``'s checksums as it was saved (called when its save is committed)."""
    atomic_write_text(checkpoint / CHECKSUMS_FILE, json.dumps(file_checksums(checkpoint), indent=0, sort_keys=True))


def has_checksums(checkpoint: Path) -> bool:
    return (checkpoint / CHECKSUMS_FILE).is_file()


TORN_METADATA = f"its {METADATA_FILE} is empty or corrupt (a save was interrupted)"


def readable_metadata(checkpoint: Path) -> bool:
    try:
        json.loads((checkpoint / METADATA_FILE).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return True


def damage(checkpoint: Path) -> str | None:
    """Why ``checkpoint`` cannot be resumed as it stands (unreadable metadata, a file changed or missing since its
    save), or None; a checkpoint without checksums is judged by its metadata only."""
    if not readable_metadata(checkpoint):
        return TORN_METADATA
    if not has_checksums(checkpoint):
        return None
    try:
        saved = json.loads((checkpoint / CHECKSUMS_FILE).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return f"its {CHECKSUMS_FILE} is corrupt"
    now = file_checksums(checkpoint)
    changed = sorted(name for name in saved if now.get(name) != saved[name])
    if changed:
        missing = [name for name in changed if name not in now]
        return (
            f"{len(changed)} of its {len(saved)} files no longer match the checksums written at its save "
            f"({'missing: ' if missing else ''}{changed[0]})"
        )
    return None


def prune_checkpoints(checkpoints: Path, keep_every: int | None, keep: int = KEPT_WHILE_TRAINING) -> None:
    """Delete complete checkpoints older than the ``keep`` newest, except the steps that are multiples of
    ``keep_every``, once the newest is verified; a checkpoint still being written (no metadata) is left alone."""
    complete = complete_checkpoints(checkpoints)
    if not complete or not has_checksums(complete[-1]) or damage(complete[-1]) is not None:
        return
    for path in complete[:-keep]:
        if not (keep_every and checkpoint_step(path) % keep_every == 0):
            shutil.rmtree(path, ignore_errors=True)


def move_aside(checkpoint: Path, reason: str) -> None:
    """Move ``checkpoint`` to ``<run>/unreadable-checkpoints/`` (never deleted) and log one line saying why."""
    target = checkpoint.parent.parent / UNREADABLE_DIR / checkpoint.name
    target.parent.mkdir(exist_ok=True)
    if target.exists():
        target = target.with_name(f"{checkpoint.name}-{len(list(target.parent.glob(f'{checkpoint.name}*')))}")
    size = folder_bytes(checkpoint)
    checkpoint.rename(target)
    logger.warning("%s (%.1f MB) cannot be resumed: %s; moved to %s", checkpoint, size / 1e6, reason, target)


def set_aside_damaged(checkpoints: Path) -> None:
    """Move aside every complete checkpoint with unreadable metadata (Levanter reads them all to find the newest),
    then, newest first, every one that cannot be resumed, down to the first good one."""
    for checkpoint in complete_checkpoints(checkpoints):
        if not readable_metadata(checkpoint):
            move_aside(checkpoint, TORN_METADATA)
    for checkpoint in reversed(complete_checkpoints(checkpoints)):
        reason = damage(checkpoint)
        if reason is None:
            return
        move_aside(checkpoint, reason)


def resume_or_initialize(initial_state: Callable[[], State], checkpoints: Path) -> State:
    """``initial_state()`` after setting aside damaged checkpoints; when the newest fails to load and has no
    checksums to clear it, it is moved aside too and the next is tried. One matching its checksums is not blamed:
    its error is raised."""
    while True:
        set_aside_damaged(checkpoints)
        try:
            return initial_state()
        except Exception as error:
            complete = complete_checkpoints(checkpoints)
            if not complete or has_checksums(complete[-1]):
                raise
            first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
            move_aside(complete[-1], f"it failed to load ({type(error).__name__}: {first_line[:300]})")
