"""Prefetch: every Hugging Face hub item a preset needs (datasets, tokenizers, lm-eval task datasets), each at the
revision the preset names, into the shared cache (``HF_HOME``), on a host that has the network.

Compute jobs then run with the hub offline (``HF_HUB_OFFLINE=1``, ``HF_DATASETS_OFFLINE=1``, set by the workflow when
the site names ``hf_home``) and read only that cache; an item missing from it fails with one sentence naming the item
and this stage. lm-eval tasks are fetched one by one, so one broken task is named and the others are still fetched.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)
PREFETCH_COMMAND = "snakemake --profile slurm prefetch"


def missing_from_cache(item: str) -> str:
    """The sentence for a hub item that an offline job did not find in the cache."""
    cache = os.environ.get("HF_HOME", "~/.cache/huggingface")
    return (f"{item} is not in the Hugging Face cache {cache} and this job runs with the hub offline; prefetch it on "
            f"a host with network (`{PREFETCH_COMMAND}`, with the same site settings).")


def is_local(name: str) -> bool:
    """Whether a dataset id or tokenizer name is a local path rather than a hub item."""
    return name.startswith(("/", ".", "~")) or Path(name).expanduser().exists()


def hub_items(config: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """What a preset reads from the hub: hub datasets and pretrained tokenizers (local paths excluded) with their
    revisions, and lm-eval's built-in tasks (none when ``downstream.task_dir`` names local tasks)."""
    datasets_ = [{"name": name, "id": spec["source"]["id"], "revision": spec["source"].get("revision")}
                 for name, spec in config["datasets"].items()
                 if spec["source"]["kind"] == "hf" and not is_local(spec["source"]["id"])]
    tokenizers = [{"name": name, "id": spec["name"], "revision": spec.get("revision")}
                  for name, spec in config["tokenizers"].items()
                  if spec["kind"] == "pretrained" and not is_local(spec["name"])]
    tasks = list(config["downstream"]["tasks"]) if config["downstream"]["task_dir"] is None else []
    return {"datasets": datasets_, "tokenizers": tokenizers, "lm_eval_tasks": tasks}


def load_lm_eval_tasks(manager, task_names: list[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """Load (and so download) each task on its own: ({name: task}, {name: error}) so one broken task does not take
    the others down."""
    loaded, failed = {}, {}
    for name in task_names:
        try:
            loaded.update(manager.load([name])["tasks"])
        except Exception as error:  # noqa: BLE001 - any failure of one task is reported by name, the rest go on
            logger.exception("lm-eval task %s failed to load", name)
            failed[name] = f"{type(error).__name__}: {error}"
    return loaded, failed


def recorded_commit(manifest_path: Path, kind: str, item_id: str, revision: str | None) -> str:
    """The commit the prefetch manifest ``manifest_path`` recorded for the ``kind`` ("datasets" or "tokenizers") item
    ``item_id`` at ``revision``. Jobs load that commit, not the branch or tag: the shared cache's refs follow the last
    prefetch into it (perhaps another preset's, after the hub moved the branch), not this preset's manifest."""
    for item in json.loads(Path(manifest_path).read_text())[kind]:
        if item["id"] == item_id and item["revision"] == revision:
            return item["commit"]
    raise ValueError(f"{kind[:-1].capitalize()} {item_id}@{revision or 'main'} is not in the prefetch manifest "
                     f"{manifest_path}; rerun the prefetch (`{PREFETCH_COMMAND}`).")


def prefetched_dataset(name: str, repo_id: str, revision: str | None) -> Path:
    """The hub cache's snapshot of dataset repository ``repo_id`` at ``revision`` (a commit, or a branch or tag the
    prefetch resolved), read with the hub offline. ``datasets`` itself, offline, ignores the revision and loads the
    most recently prepared one it has of the repository; a snapshot folder is the pinned commit's files."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo_id, repo_type="dataset", revision=revision, local_files_only=True))
    except LocalEntryNotFoundError as error:
        raise FileNotFoundError(missing_from_cache(f"Dataset {name!r} ({repo_id}@{revision or 'main'})")) from error


def prefetch(items: dict[str, list], task_dir: str | None = None) -> dict[str, Any]:
    """Download every item into the Hugging Face cache; returns the manifest (revision asked for, commit resolved
    where the hub reports one). A dataset is its repository's files at the revision (a snapshot, which compute jobs
    prepare; checked to be a dataset ``datasets`` builds), a tokenizer what ``AutoTokenizer`` loads. Fails after
    trying everything, with one sentence naming each item that failed."""
    import datasets
    from huggingface_hub import HfApi, snapshot_download
    from transformers import AutoTokenizer

    from pipeline.evaluate.lm_eval_tasks import task_manager

    api, manifest, failed = HfApi(), {"datasets": [], "tokenizers": [], "lm_eval_tasks": []}, {}
    for item in items["datasets"]:
        try:
            # Fails when the hub is unreachable; snapshot_download alone would then return a snapshot cached earlier.
            api.dataset_info(item["id"], revision=item["revision"])
            snapshot = Path(snapshot_download(item["id"], repo_type="dataset", revision=item["revision"]))
            datasets.load_dataset_builder(str(snapshot))
            manifest["datasets"].append({**item, "commit": snapshot.name})
        except Exception as error:  # noqa: BLE001 - reported by name below
            failed[f"dataset {item['name']} ({item['id']}@{item['revision'] or 'main'})"] = \
                f"{type(error).__name__}: {error}"
    for item in items["tokenizers"]:
        try:
            AutoTokenizer.from_pretrained(item["id"], revision=item["revision"])
            commit = api.model_info(item["id"], revision=item["revision"]).sha
            manifest["tokenizers"].append({**item, "commit": commit})
        except Exception as error:  # noqa: BLE001 - reported by name below
            failed[f"tokenizer {item['name']} ({item['id']}@{item['revision'] or 'main'})"] = \
                f"{type(error).__name__}: {error}"
    if items["lm_eval_tasks"]:
        loaded, task_failures = load_lm_eval_tasks(task_manager(task_dir), items["lm_eval_tasks"])
        manifest["lm_eval_tasks"] = sorted(loaded)
        failed.update({f"lm-eval task {name}": message for name, message in task_failures.items()})
    if failed:
        raise ValueError(f"prefetch: {len(failed)} item(s) failed ({'; '.join(f'{k}: {v}' for k, v in failed.items())})"
                         "; fix or remove them in the preset and rerun the prefetch rule.")
    return manifest


def run_prefetch(items_json: str, out: Path, task_dir: str | None) -> dict[str, Any]:
    from pipeline.artifacts import atomic_write_text

    manifest = prefetch(json.loads(items_json), task_dir)
    atomic_write_text(out, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest
