"""The Hugging Face hub as a job sees it (docs/cluster.md#prefetch): offline or not, the prefetch's records
``{name, id, revision, commit}``, and the cache's snapshots. Jobs load the recorded commit, never the branch or tag:
the shared cache's refs follow the last prefetch into it, perhaps another preset's."""

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
    """The hub cache's snapshot of dataset ``repo_id`` at ``revision``, downloaded where online. Offline,
    ``datasets`` ignores the revision and loads its latest prepared copy; a snapshot folder is the pinned commit's."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo_id, repo_type="dataset", revision=revision, local_files_only=hub_offline()))
    except LocalEntryNotFoundError as error:
        raise FileNotFoundError(missing_from_cache(f"Dataset {name!r} ({repo_id}@{revision or 'main'})")) from error
