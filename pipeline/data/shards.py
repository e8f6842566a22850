"""A corpus export in numbered shards that resumes where it stopped (docs/runs.md#data-jobs-resume): per split,
``{split}-NNNNN.jsonl.gz`` of ``docs_per_shard`` documents in the staging folder, each listed when done in the
ledger ``shards.jsonl`` (first line: the export's key); a stop signal abandons the current shard (``RunStopped``).
What a stopped data job kept: an export's ledger, or a token cache's Levanter ledgers (``whole_ledger``)."""

import dataclasses
import itertools
import json
import logging
import math
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pipeline.data.files import atomic_directory, sha256_file, staging_directory, write_jsonl
from pipeline.execution.errors import RunStopped
from pipeline.execution.progress import Progress
from pipeline.execution.stop_signals import StopSignals

DOCS_PER_SHARD = 100_000
SHARD_GZIP_LEVEL = 1  # fast; OpenWebText is ~40 GB of text
LEDGER = "shards.jsonl"
LEVANTER_LEDGER = "shard_ledger.json"
"""The shard ledger Levanter's cache builder keeps in each split of a token cache (``pipeline.data.cache``)."""
logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class SplitSource:
    """One split of a corpus: its ``rows`` (blank ones included) and ``read(start)``, its texts from row ``start``."""

    rows: int
    read: Callable[[int], Iterator[str]]


def shard_name(split: str, index: int) -> str:
    return f"{split}-{index:05d}.jsonl.gz"


def shards_planned(rows: dict[str, int], docs_per_shard: int) -> int:
    """The shards of an export of ``rows`` per split: ⌈rows / docs_per_shard⌉ each (fewer where rows are blank)."""
    return sum(max(1, math.ceil(count / docs_per_shard)) for count in rows.values())


def read_ledger(staging: Path) -> tuple[dict | None, list[dict]]:
    """The key and the shard entries of a staging folder's ledger ((None, []) without one); a torn last line (the
    job killed while appending it) is dropped: its shard is written again."""
    path = staging / LEDGER
    lines = path.read_text().splitlines() if path.is_file() else []
    entries = []
    for line in lines:
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return (entries[0].get("key"), entries[1:]) if entries else (None, [])


def kept_shards(staging: Path, key: dict) -> dict[str, list[dict]]:
    """The finished shards of each split that a rerun keeps (those of the export ``key`` whose file still has its
    sha256, up to the first that does not); the ledger is rewritten to them and every other file is removed."""
    recorded_key, entries = read_ledger(staging)
    if recorded_key is not None and recorded_key != key:
        logger.info("%s was left by an export of another source or shard size; starting over", staging)
    kept: dict[str, list[dict]] = {}
    broken: set[str] = set()
    for entry in entries if recorded_key == key else []:
        shards = kept.setdefault(entry["split"], [])
        path = staging / entry["file"]
        if entry["split"] in broken:
            continue
        if entry["index"] == len(shards) and path.is_file() and sha256_file(path) == entry["sha256"]:
            shards.append(entry)
        else:
            broken.add(entry["split"])
            logger.info("%s: shard %s is missing or torn (another sha256); writing it again", staging, entry["file"])
    names = {entry["file"] for shards in kept.values() for entry in shards}
    for path in staging.iterdir():
        if path.name not in names:
            path.unlink()
    lines = [{"key": key}, *(entry for shards in kept.values() for entry in shards)]
    (staging / LEDGER).write_text("".join(json.dumps(line) + "\n" for line in lines))
    return kept


def whole_ledger(cache_dir: Path, *, restore: bool = False) -> dict | None:
    """The shard ledger Levanter's builder keeps in ``cache_dir``, None without a readable one; a ledger torn by a
    stop or being rewritten now is read from Levanter's ``<ledger>.bak`` (a few rows behind), which ``restore`` copies
    back in its place for a resuming builder (it trims and rewrites the rows)."""
    for path in (cache_dir / LEVANTER_LEDGER, cache_dir / f"{LEVANTER_LEDGER}.bak"):
        try:
            ledger = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if restore and path.name != LEVANTER_LEDGER:
            shutil.copyfile(path, cache_dir / LEVANTER_LEDGER)
            logger.info("%s: the ledger was torn; resuming from its backup", cache_dir)
        return ledger
    return None


def finished_shard_count(cache_dir: Path) -> int:
    """The shards Levanter's ledger in ``cache_dir`` lists as finished (``whole_ledger``); 0 without one."""
    return len((whole_ledger(cache_dir) or {}).get("finished_shards", []))


def shards_done(out_dir: Path) -> tuple[int, int | None]:
    """(shards finished, of how many or None) that a stopped data job writing ``out_dir`` keeps for its rerun: an
    export's from its ledger and key, a token cache's from Levanter's ledgers; (0, None) without a staging folder."""
    staging = staging_directory(out_dir)
    key, entries = read_ledger(staging)
    if key is not None:
        return len(entries), shards_planned(key["rows"], key["docs_per_shard"])
    splits = [path for path in staging.iterdir() if path.is_dir()] if staging.is_dir() else []
    return sum(finished_shard_count(path) for path in splits), None


def stopped(what: str, stop: StopSignals, done: int, total: int, kept: str) -> RunStopped:
    """The stop of data job ``what`` after ``done`` of its ``total`` shards, saying what of them is ``kept``."""
    return RunStopped(
        f"{what}: stopped on request ({stop.signal_name}: SIGTERM to the job or SLURM's walltime warning) after "
        f"{done} of {total} shards; {kept}, rerun the job to resume."
    )


class _ShardWriter:
    """Writes the shards of one export into its staging folder, appending each finished one to the ledger."""

    def __init__(self, what: str, staging: Path, docs_per_shard: int, planned: int, stop: StopSignals):
        self.what, self.staging, self.docs_per_shard = what, staging, docs_per_shard
        self.planned, self.stop, self.done = planned, stop, 0

    def documents(self, source: SplitSource, start: int) -> Iterator[tuple[int, str]]:
        """The non-blank texts of ``source`` from row ``start`` to its ``rows``, each with the row after it; a stop
        signal ends them with ``RunStopped``."""
        for row, text in enumerate(itertools.islice(source.read(start), source.rows - start), start + 1):
            if self.stop.signal_name is not None:
                kept = f"the finished ones are kept in {self.staging}"
                raise stopped(self.what, self.stop, self.done, self.planned, kept)
            if text.strip():
                yield row, text

    def split(self, split: str, source: SplitSource, shards: list[dict], progress: Progress) -> dict:
        """Write ``split`` after its kept ``shards``; its manifest entry."""
        self.done += len(shards)
        documents = self.documents(source, shards[-1]["rows_end"] if shards else 0)
        while (first := next(documents, None)) is not None:
            ends = [first[0]]

            def texts(first: str = first[1], ends: list[int] = ends) -> Iterator[str]:
                yield first
                for ends[0], text in itertools.islice(documents, self.docs_per_shard - 1):
                    yield text

            name = shard_name(split, len(shards))
            written = write_jsonl(self.staging / name, texts(), compresslevel=SHARD_GZIP_LEVEL)
            entry = {"split": split, "index": len(shards), "file": name, **written, "rows_end": ends[0]}
            entry["sha256"] = sha256_file(self.staging / name)
            with (self.staging / LEDGER).open("a") as ledger:
                ledger.write(json.dumps(entry) + "\n")
            shards.append(entry)
            self.done += 1
            rows = ends[0] - (shards[-2]["rows_end"] if len(shards) > 1 else 0)
            progress.advance(rows, note=f"shards {self.done} of {self.planned}")
        totals = {key: sum(entry[key] for entry in shards) for key in ("documents", "characters")}
        if totals["documents"] == 0:
            raise ValueError(f"{self.what}: split {split!r} has no non-blank documents; expected at least one.")
        return {**totals, "dropped_blank": source.rows - totals["documents"], "shards": shards}


def export_shards(
    out_dir: Path,
    splits: dict[str, SplitSource],
    header: dict[str, Any],
    *,
    what: str,
    docs_per_shard: int = DOCS_PER_SHARD,
    overwrite: bool = False,
    first_rows: int | None = None,
) -> dict:
    """Export ``splits`` (``first_rows``: only each one's first rows, a timed slice) to shards in ``out_dir``,
    returning the ``manifest.json`` written: ``header`` and per split {"documents", "characters", "files",
    "dropped_blank", "shards"}; an existing ``out_dir`` needs ``overwrite``."""
    out_dir = Path(out_dir)
    if first_rows is not None:
        splits = {split: SplitSource(min(source.rows, first_rows), source.read) for split, source in splits.items()}
    rows = {split: source.rows for split, source in splits.items()}
    key = {**header, "rows": rows, "docs_per_shard": docs_per_shard}
    with StopSignals() as stop, atomic_directory(out_dir, overwrite=overwrite, resumable=True) as staging:
        kept = kept_shards(staging, key)
        resumed = sum(shards[-1]["rows_end"] for shards in kept.values() if shards)
        progress = Progress(what, sum(rows.values()), "rows", done=resumed)
        writer = _ShardWriter(what, staging, docs_per_shard, shards_planned(rows, docs_per_shard), stop)
        manifest: dict[str, Any] = dict(header)
        for split, source in splits.items():
            manifest[split] = writer.split(split, source, kept.get(split, []), progress)
            shards = manifest[split]["shards"]
            manifest[split]["files"] = [str((out_dir / entry["file"]).resolve()) for entry in shards]
            manifest[split]["shards"] = [
                {key: entry[key] for key in ("file", "documents", "characters", "sha256")} for entry in shards
            ]
        (staging / LEDGER).unlink()
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest
