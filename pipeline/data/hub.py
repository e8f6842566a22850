"""The Hugging Face hub as a job sees it: offline or not, what the prefetch recorded, and the cache's snapshots.

Compute jobs run with the hub offline (``HF_HUB_OFFLINE=1``, ``HF_DATASETS_OFFLINE=1``, set by the workflow when the
site names ``hf_home``) and read only the shared cache the prefetch filled; an item missing from it fails with one
sentence naming the item and the prefetch. Each prefetched item has a record ``{name, id, revision, commit}``: jobs
load the recorded commit, not the branch or tag, because the shared cache's refs follow the last prefetch into it
(perhaps another preset's, after the hub moved the branch), not this preset's record.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pipeline.execution.job_env import hub_offline

PREFETCH_COMMAND = "snakemake --profile profiles/slurm prefetch"


def missing_from_cache(item: str) -> str:
    """The sentence for a hub item that an offline job did not find in the cache."""
    cache = os.environ.get("HF_HOME", "~/.cache/huggingface")
    return (
        f"{item} is not in the Hugging Face cache {cache} and this job runs with the hub offline; prefetch it on "
        f"a host with network (`{PREFETCH_COMMAND}`, with the same site settings)."
    )


def is_local(name: str) -> bool:
    """Whether a dataset id or tokenizer name is a local path rather than a hub item."""
    return name.startswith(("/", ".", "~")) or Path(name).expanduser().exists()


def is_hub_dataset(path: str) -> bool:
    """Whether an lm-eval task's ``dataset_path`` names a hub repository: neither a local path nor one of the builders
    ``datasets`` ships (json, csv, parquet, ...)."""
    from datasets.packaged_modules import _PACKAGED_DATASETS_MODULES

    return not is_local(path) and path not in _PACKAGED_DATASETS_MODULES


def recorded_commit(record_path: Path, item_id: str, revision: str | None) -> str:
    """The commit the prefetch record ``record_path`` holds for hub item ``item_id`` at ``revision``."""
    record = json.loads(Path(record_path).read_text())
    if record["id"] != item_id or record["revision"] != revision:
        raise ValueError(
            f"{item_id}@{revision or 'main'} is not the item of the prefetch record {record_path} "
            f"({record['id']}@{record['revision'] or 'main'}); rerun the prefetch (`{PREFETCH_COMMAND}`)."
        )
    return record["commit"]


def dataset_snapshot(name: str, repo_id: str, revision: str | None) -> Path:
    """The hub cache's snapshot of dataset repository ``repo_id`` at ``revision`` (a commit, or a branch or tag the
    prefetch resolved), downloaded where the hub is online. ``datasets`` itself, offline, ignores the revision and
    loads the most recently prepared one it has of the repository; a snapshot folder is the pinned commit's files."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo_id, repo_type="dataset", revision=revision, local_files_only=hub_offline()))
    except LocalEntryNotFoundError as error:
        raise FileNotFoundError(missing_from_cache(f"Dataset {name!r} ({repo_id}@{revision or 'main'})")) from error
