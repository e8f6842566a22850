"""lm-eval's side of the downstream evaluation: which tasks exist and its results as tidy rows. Light imports only
(lm-eval's task index), so ``downstream`` checks task names before it starts Ray and loads a model."""

import difflib
import logging
import math
from pathlib import Path
from typing import Any

from lm_eval.tasks import TaskManager

from pipeline.data.hub import PREFETCH_COMMAND
from pipeline.execution.job_env import hub_offline

logger = logging.getLogger(__name__)

SCORED_OUTPUT_TYPES = ("loglikelihood", "loglikelihood_rolling", "multiple_choice")
"""lm-eval output types ``LevanterLM`` scores (all of the paper's 11 tasks are among them)."""


def task_manager(task_dir: str | Path | None):
    """lm-eval's ``TaskManager``: the tasks of ``task_dir`` only, or lm-eval's built-in tasks when it is None."""
    if task_dir is None:
        return TaskManager()
    if not Path(task_dir).is_dir():
        raise FileNotFoundError(f"downstream.task_dir: {task_dir} is not a folder of lm-eval task YAMLs.")
    return TaskManager(include_path=str(task_dir), include_defaults=False)


def resolve_tasks(task_names: list[str], task_dir: str | Path | None):
    """The ``TaskManager`` that knows every name of ``task_names`` (lm-eval task or group names); an unknown name
    fails with one sentence naming it, where it was looked for, and the names that exist (or the nearest ones)."""
    manager = task_manager(task_dir)
    known = set(manager.all_tasks)
    for name in task_names:
        if name not in known:
            where = f"task folder {task_dir}" if task_dir is not None else "lm-eval's built-in tasks"
            nearest = difflib.get_close_matches(name, sorted(known), n=5)
            expected = f"one of {sorted(known)}" if len(known) <= 20 else f"an lm-eval task name (nearest: {nearest})"
            raise ValueError(f"downstream.tasks: unknown lm-eval task {name!r} in {where}; expected {expected}.")
    return manager


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


def check_scored_output_types(manager, task_names: list[str]) -> None:
    """Refuse tasks that need text generation (the adapter scores log-likelihoods only), before a model loads. Tasks
    load one by one, so a task whose dataset fails to load (e.g. not prefetched on an offline node) is named."""
    tasks, failed = load_lm_eval_tasks(manager, task_names)
    if failed:
        hint = (
            f"prefetch them on a host with network (`{PREFETCH_COMMAND}`)"
            if hub_offline()
            else "see the job log for each traceback"
        )
        reasons = "; ".join(failed.values())
        raise ValueError(f"downstream.tasks: lm-eval task(s) {sorted(failed)} failed to load ({reasons}); {hint}.")
    for name, task in tasks.items():
        if task.OUTPUT_TYPE not in SCORED_OUTPUT_TYPES:
            raise ValueError(
                f"downstream.tasks: lm-eval task {name!r} has output_type {task.OUTPUT_TYPE!r}; "
                f"expected one of {list(SCORED_OUTPUT_TYPES)}."
            )


def _metric_value(value: Any) -> float:
    """A metric or standard error as a float; lm-eval writes ``"N/A"`` where it has none."""
    return float(value) if isinstance(value, (int, float)) else math.nan


def sample_count(results: dict, task: str) -> int:
    """Documents evaluated for a task, or summed over a group's subtasks."""
    if task in results.get("n-samples", {}):
        return int(results["n-samples"][task]["effective"])
    return sum(sample_count(results, subtask) for subtask in results.get("group_subtasks", {}).get(task, []))


def tidy_rows(results: dict, *, run_id: str, family: str, pair: str, shots: int) -> list[dict]:
    """One row per task (or group) and metric of lm-eval's results, with the metric's standard error."""
    rows = []
    for task, metrics in sorted(results["results"].items()):
        for key, value in metrics.items():
            metric, _, filter_name = key.partition(",")
            if metric == "alias" or metric.endswith("_stderr") or not filter_name:
                continue
            rows.append(
                {
                    "run_id": run_id,
                    "family": family,
                    "pair": pair,
                    "task": task,
                    "shots": shots,
                    "metric": metric,
                    "value": _metric_value(value),
                    "stderr": _metric_value(metrics.get(f"{metric}_stderr,{filter_name}")),
                    "n_samples": sample_count(results, task),
                }
            )
    return rows
