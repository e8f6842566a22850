"""Where an lm-eval task's hub dataset is read from: the hub cache's snapshot of one commit (docs/cluster.md#prefetch).

``prefetch_task`` records the commit each task dataset resolves to (``downstream.revisions``, else ``main``); a
loading-script-only dataset (which ``datasets`` 4 refuses) is read from ``refs/convert/parquet`` or refused. Jobs
pin each task's ``dataset_path`` to that snapshot folder (``pin_task_datasets``), since ``datasets`` offline ignores a
revision. ``PinnedTaskFactory`` rewrites the merged config of lm-eval 0.4.13's ``TaskFactory._load_full_config``."""

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lm_eval.tasks._factory import TaskFactory

from pipeline.data.hub import PREFETCH_COMMAND, dataset_snapshot, is_hub_dataset
from pipeline.evaluate.lm_eval_tasks import load_lm_eval_tasks, task_manager

PARQUET_BRANCH = "refs/convert/parquet"


@dataclasses.dataclass(frozen=True)
class TaskDataset:
    """A task's hub dataset ``id``: the ``revision`` asked for (None: main), the ``commit`` it resolved to, and
    whether that commit is the parquet conversion of a loading-script dataset (``converted``)."""

    id: str
    revision: str | None
    commit: str
    converted: bool

    def task_config(self, config: dict[str, Any]) -> dict[str, Any]:
        """lm-eval task ``config`` reading this dataset from the snapshot of its commit."""
        snapshot = dataset_snapshot(f"lm-eval dataset {self.id}", self.id, self.commit)
        pinned = {**config, "dataset_path": str(snapshot)}
        if self.converted:
            kwargs = {**(config.get("dataset_kwargs") or {}), "data_dir": config.get("dataset_name") or "default"}
            pinned.update(dataset_name=None, dataset_kwargs=kwargs)
        return pinned


class PinnedTaskFactory(TaskFactory):
    """lm-eval's task factory, with every hub ``dataset_path`` replaced by the ``TaskDataset`` that ``source(id)``
    gives (tasks of a ``custom_dataset``, a local path or a builder of ``datasets`` are left as they are)."""

    def __init__(self, source: Callable[[str], TaskDataset], meta: dict[str, Any] | None = None):
        super().__init__(meta=meta)
        self.source = source

    def _load_full_config(self, entry, overrides=None) -> dict[str, Any]:
        config = super()._load_full_config(entry, overrides)
        path = config.get("dataset_path")
        if path is None or config.get("custom_dataset") is not None or not is_hub_dataset(str(path)):
            return config
        return self.source(str(path)).task_config(config)


def pin_task_datasets(manager, source: Callable[[str], TaskDataset]):
    """``manager`` (lm-eval's ``TaskManager``) building its tasks with ``PinnedTaskFactory(source)``."""
    manager._factory = PinnedTaskFactory(source, meta=manager.metadata)
    return manager


def recorded_source(records: list[Path]) -> Callable[[str], TaskDataset]:
    """The task datasets the prefetch records ``records`` hold, by id; an id none holds fails with one sentence."""
    recorded = {
        item["id"]: TaskDataset(**item) for path in records for item in json.loads(Path(path).read_text())["datasets"]
    }

    def source(dataset_id: str) -> TaskDataset:
        if dataset_id not in recorded:
            raise ValueError(
                f"lm-eval dataset {dataset_id} is in none of the prefetch records "
                f"{[str(path) for path in records]}; rerun the prefetch (`{PREFETCH_COMMAND}`)."
            )
        return recorded[dataset_id]

    return source


def resolve_on_hub(dataset_id: str, revision: str | None) -> TaskDataset:
    """The commit of hub dataset ``dataset_id`` at ``revision``, or of its parquet conversion where it is a loading
    script; a loading script without one is refused with its name."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import RevisionNotFoundError

    api = HfApi()
    info = api.dataset_info(dataset_id, revision=revision)
    loading_script = f"{dataset_id.split('/')[-1]}.py"  # a loading-script repository: <name>.py at its top
    if loading_script not in [sibling.rfilename for sibling in info.siblings or []]:
        return TaskDataset(dataset_id, revision, info.sha, converted=False)
    try:
        converted = api.dataset_info(dataset_id, revision=PARQUET_BRANCH)
    except RevisionNotFoundError as error:
        raise ValueError(
            f"lm-eval dataset {dataset_id}@{revision or 'main'} is a loading script, which datasets 4 "
            f"refuses, and has no parquet conversion ({PARQUET_BRANCH}); remove its task from "
            "downstream.tasks."
        ) from error
    return TaskDataset(dataset_id, revision, converted.sha, converted=True)


def prefetch_task(task: str, task_dir: str | None, revisions: dict[str, str]) -> dict[str, Any]:
    """Download lm-eval task (or group) ``task`` with its hub datasets at the commits ``revisions`` pins (else main);
    returns ``{task, datasets: [TaskDataset fields]}``. A task that fails to load is one sentence naming it."""
    resolved: dict[str, TaskDataset] = {}

    def source(dataset_id: str) -> TaskDataset:
        if dataset_id not in resolved:
            resolved[dataset_id] = resolve_on_hub(dataset_id, revisions.get(dataset_id))
        return resolved[dataset_id]

    _, failed = load_lm_eval_tasks(pin_task_datasets(task_manager(task_dir), source), [task])
    if failed:
        raise ValueError(
            f"prefetch: lm-eval task {task} failed ({failed[task]}); fix or remove it in the preset "
            "(downstream.tasks, downstream.revisions), then rerun the prefetch."
        )
    return {"task": task, "datasets": [dataclasses.asdict(item) for _, item in sorted(resolved.items())]}
