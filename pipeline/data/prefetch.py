"""Prefetch one hub item of a preset (a dataset or a pretrained tokenizer) at its revision into the shared cache
(``HF_HOME``) on a host with the network (docs/cluster.md#prefetch), one job and record ``{name, id, revision,
commit}`` per item, so a failure stops only its readers. lm-eval tasks: ``pipeline.evaluate.task_sources``."""

from pathlib import Path
from typing import Any

import yaml

from pipeline.config import downstream_task_dir
from pipeline.data.hub import is_hub_dataset, is_local


def hub_items(config: dict[str, Any]) -> dict[str, list]:
    """What a preset reads from the hub: hub datasets and pretrained tokenizers (local paths excluded) with their
    revisions, and the lm-eval tasks whose datasets come from the hub: lm-eval's built-in tasks, or those of
    ``downstream.task_dir`` when one of its YAMLs names a hub ``dataset_path``."""
    datasets_ = [
        {"name": name, "id": spec["source"]["id"], "revision": spec["source"].get("revision")}
        for name, spec in config["datasets"].items()
        if spec["source"]["kind"] == "hf" and not is_local(spec["source"]["id"])
    ]
    tokenizers = [
        {"name": name, "id": spec["name"], "revision": spec.get("revision")}
        for name, spec in config["tokenizers"].items()
        if spec["kind"] == "pretrained" and not is_local(spec["name"])
    ]
    task_dir = downstream_task_dir(config)
    reads_hub = task_dir is None or any(is_hub_dataset(path) for path in task_dataset_paths(task_dir))
    return {
        "datasets": datasets_,
        "tokenizers": tokenizers,
        "lm_eval_tasks": list(config["downstream"]["tasks"]) if reads_hub else [],
    }


def task_dataset_paths(task_dir: Path) -> list[str]:
    """The ``dataset_path`` values the task YAMLs of ``task_dir`` name (plain YAML; lm-eval's ``!function`` tags are
    read as nothing)."""
    loader = type("TaskYamlLoader", (yaml.SafeLoader,), {})
    loader.add_multi_constructor("!", lambda _loader, _suffix, _node: None)
    loaded = [yaml.load(path.read_text(), Loader=loader) for path in sorted(task_dir.glob("*.yaml"))]
    return [str(raw["dataset_path"]) for raw in loaded if isinstance(raw, dict) and raw.get("dataset_path")]


def prefetch_dataset(item: dict[str, Any]) -> dict[str, Any]:
    """Download dataset repository ``item["id"]`` at ``item["revision"]`` (a snapshot, which compute jobs prepare;
    checked to be a dataset ``datasets`` builds) and return its record."""
    import datasets
    from huggingface_hub import HfApi, snapshot_download

    # Fails when the hub is unreachable; snapshot_download alone would then return a snapshot cached earlier.
    HfApi().dataset_info(item["id"], revision=item["revision"])
    snapshot = Path(snapshot_download(item["id"], repo_type="dataset", revision=item["revision"]))
    datasets.load_dataset_builder(str(snapshot))
    return {**item, "commit": snapshot.name}


def prefetch_tokenizer(item: dict[str, Any]) -> dict[str, Any]:
    """Download what ``AutoTokenizer`` loads of ``item["id"]`` at ``item["revision"]`` and return its record."""
    from huggingface_hub import HfApi
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(item["id"], revision=item["revision"])
    return {**item, "commit": HfApi().model_info(item["id"], revision=item["revision"]).sha}


def run_prefetch(kind: str, item: dict[str, Any], out: Path) -> dict[str, Any]:
    """Prefetch one ``kind`` ("dataset" or "tokenizer") item and write its record to ``out``; a failure is one sentence
    naming the item, and writes nothing."""
    from pipeline.artifacts import atomic_write_json

    fetch = {"dataset": prefetch_dataset, "tokenizer": prefetch_tokenizer}[kind]
    try:
        record = fetch(item)
    except Exception as error:  # noqa: BLE001 - any failure is reported with the item's name
        raise ValueError(
            f"prefetch: {kind} {item['name']} ({item['id']}@{item['revision'] or 'main'}) failed "
            f"({type(error).__name__}: {error}); fix its revision or remove it in the preset, then rerun "
            "the prefetch."
        ) from error
    atomic_write_json(out, record)
    return record
