"""A run's identity: the fingerprint of everything that determines its weights, stored as ``identity.json`` with its
checkpoints (docs/runs.md#fingerprints): SHA-256 over the spec's ``WEIGHTS`` fields, the tokenizer files, the train
split's row counts and document offsets, ``TRAIN_STEP``, and for a fine-tune its source's fingerprint and final
checkpoint metadata. A run resumes only from checkpoints of its own fingerprint."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.config.specs import WEIGHTS, FinetuneSpec, RunSpec, role_values
from pipeline.train.digests import json_digest

logger = logging.getLogger(__name__)

IDENTITY_FILE = "identity.json"
SUPERSEDED_DIR = "superseded"
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
)
CACHE_SPLITS = ("train", "validation")
TRAIN_STEP = "adam-state-1"
"""The train step's version: ``adam-state-1`` is Levanter's step without buffer donation (``pipeline.train.trainer``)
reading its learning-rate schedule and Adam's β1, β2, ε from the optimizer state (``pipeline.train.schedule``). Its
updates equal ``schedule-state-1``'s (β, ε as constants) but its optimizer state has another structure, so those
checkpoints cannot be restored; ``schedule-state-1``'s rates differ from ``undonated-1``'s (the schedule's numbers as
constants) by float32 rounding; checkpoints of the donated step (no ``train_step`` in their identity) got wrong
gradients. Checkpoints of another version are moved aside."""


def _hash_files(root: Path, paths: list[Path], digest: Any = None) -> str:
    """The SHA-256 (continuing ``digest``) over each file's path relative to ``root`` and its bytes, by path."""
    digest = digest or hashlib.sha256()
    for path in sorted(paths):
        digest.update(str(path.relative_to(root)).encode())
        with path.open("rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def tokenizer_digest(tokenizer_dir: Path) -> str:
    """SHA-256 of the tokenizer's files (a retrained tokenizer of the same size gets another digest)."""
    files = [tokenizer_dir / name for name in TOKENIZER_FILES if (tokenizer_dir / name).is_file()]
    if not files:
        raise FileNotFoundError(
            f"{tokenizer_dir}: no tokenizer files ({', '.join(TOKENIZER_FILES[:3])}); build the tokenizer first."
        )
    return _hash_files(tokenizer_dir, files)


def cache_digest(cache_dir: Path) -> str:
    """SHA-256 of the training split's row counts and document offsets (Levanter's TreeCache layout; the ledger's
    metadata names the tokenizer by path, so it is left out); every split must have its ledger."""
    digest = hashlib.sha256()
    for split in CACHE_SPLITS:
        ledger = cache_dir / split / "shard_ledger.json"
        if not ledger.is_file():
            raise FileNotFoundError(
                f"{ledger}: missing; the token cache {cache_dir} has no complete '{split}' "
                f"split (rebuild it: delete {cache_dir} and rerun its rule)."
            )
    rows = json.loads((cache_dir / "train" / "shard_ledger.json").read_text())
    digest.update(json.dumps([rows.get("total_num_rows"), rows.get("shard_rows")], sort_keys=True).encode())
    offsets = [path for path in (cache_dir / "train").rglob("*") if path.is_file() and "offsets" in path.parts]
    return _hash_files(cache_dir, offsets, digest)


@dataclass(frozen=True)
class RunIdentity:
    """The fingerprint of one run and the parts it was computed from (kept in ``identity.json`` for a reader)."""

    fingerprint: str
    parts: dict[str, Any]

    @classmethod
    def of(
        cls,
        spec: RunSpec | FinetuneSpec,
        tokenizer_dir: Path,
        cache_dir: Path,
        source_fingerprint: str | None = None,
        preflight: bool = False,
    ) -> RunIdentity:
        """The identity of ``spec`` (a fine-tune's with its source's ``source_fingerprint``); ``preflight`` marks a
        preflight job's bounded spec, so that its checkpoints are never a real run's."""
        weights = role_values(spec, WEIGHTS)
        parts = {
            "spec": {**weights, "preflight": True} if preflight else weights,
            "tokenizer": tokenizer_digest(tokenizer_dir),
            "cache": cache_digest(cache_dir),
            "source": source_fingerprint,
            "train_step": TRAIN_STEP,
        }
        return cls(json_digest(parts, compact=True), parts)

    def to_json(self) -> str:
        return json.dumps({"fingerprint": self.fingerprint, **self.parts}, indent=2, sort_keys=True) + "\n"


def stored_fingerprint(checkpoints: Path) -> str | None:
    """The fingerprint the checkpoints were trained under (None: no or unreadable ``identity.json``)."""
    try:
        return json.loads((checkpoints / IDENTITY_FILE).read_text())["fingerprint"]
    except (FileNotFoundError, json.JSONDecodeError, KeyError, TypeError):
        return None


def claim_run_folder(run_dir: Path, identity: RunIdentity) -> Path | None:
    """Make ``<run_dir>/checkpoints`` (and ``metrics.jsonl``) belong to ``identity``: same fingerprint, keep them
    (the run resumes); another or none, move them to ``<run_dir>/superseded/<time>-<old fingerprint>/`` so the
    run starts from step 0. Returns the folder things were moved to, or None."""
    from pipeline.artifacts import atomic_write_text, folder_bytes

    checkpoints = run_dir / "checkpoints"
    metrics = run_dir / "metrics.jsonl"
    old = stored_fingerprint(checkpoints)
    moved_to = None
    has_checkpoints = checkpoints.is_dir() and any(checkpoints.iterdir())
    if old != identity.fingerprint and (has_checkpoints or metrics.exists()):
        label = old[:12] if old else "unfingerprinted"
        moved_to = run_dir / SUPERSEDED_DIR / f"{time.strftime('%Y%m%dT%H%M%S')}-{label}"
        moved_to.mkdir(parents=True, exist_ok=True)
        size = 0
        for item in (checkpoints, metrics):
            if item.exists():
                size += folder_bytes(item) if item.is_dir() else item.stat().st_size
                shutil.move(str(item), str(moved_to / item.name))
        logger.warning(
            "%s: checkpoints and metrics of another spec (fingerprint %s, now %s) moved to %s "
            "(%.1f MB); training starts from step 0.",
            run_dir.name,
            (old or "none")[:12],
            identity.fingerprint[:12],
            moved_to,
            size / 1e6,
        )
    checkpoints.mkdir(parents=True, exist_ok=True)
    atomic_write_text(checkpoints / IDENTITY_FILE, identity.to_json())
    return moved_to


def source_fingerprint(source_dir: Path) -> str:
    """A fine-tune source's identity: its fingerprint (from its complete run record, ``summary.json``) and its final
    checkpoint's metadata (step and save time)."""
    fingerprint = recorded_fingerprint(source_dir)
    import fsspec

    from pipeline.models.checkpoint import final_checkpoint

    with fsspec.open(f"{final_checkpoint(source_dir)}/metadata.json", "r") as stream:
        metadata = stream.read()
    return hashlib.sha256(f"{fingerprint}\n{metadata}".encode()).hexdigest()


def recorded_fingerprint(run_dir: Path) -> str:
    """The fingerprint a complete run recorded in its ``summary.json``; a missing or older record fails in a
    sentence."""
    summary = Path(run_dir) / "summary.json"
    try:
        fingerprint = json.loads(summary.read_text()).get("fingerprint")
    except FileNotFoundError:
        raise FileNotFoundError(f"{summary}: missing; the source run is not complete, train it first.") from None
    if not fingerprint:
        raise ValueError(
            f"{summary}: has no 'fingerprint' (written by an older pipeline); retrain the source "
            f"run (snakemake --forcerun {summary}) so its fine-tunes know which weights they start from."
        )
    return fingerprint
