"""The stages' tidy files as the report reads them, each missing file or key failing with one sentence naming it:
run summaries (``RUN_COLUMNS``, ``FINETUNE_KEYS``), metrics logs, lm-eval's ``downstream.csv``, memory probes, and
``read_csv``."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from pipeline.analysis.memory import MEMORY_COLUMNS
from pipeline.artifacts import read_metrics, with_current_keys
from pipeline.evaluate import DOWNSTREAM_COLUMNS

RUN_COLUMNS = [
    "run_id",
    "preset",
    "group",
    "dataset",
    "size",
    "family",
    "role",
    "ablation",
    "seed",
    "parameters",
    "train_steps",
    "tokens_seen",
    "final_train_loss",
    "val_loss",
    "val_ppl",
    "mean_tokens_per_s",
]
FINETUNE_KEYS = [
    "run_id",
    "family",
    "source_run",
    "source_dataset",
    "target_dataset",
    "method",
    "num_steps",
    "source_steps",
    "train_steps",
    "seed",
    "eval_split",
    "val_loss",
    "val_ppl",
    "initial_val_ppl",
]
"""The keys of a fine-tune summary the report reads (its figure and claims)."""
ACCURACY_METRIC = "acc"


def require_columns(frame: pd.DataFrame | dict, columns: list[str], path: Path, expected: str) -> None:
    """Fail with one sentence naming the file and the first missing key."""
    missing = [column for column in columns if column not in frame]
    if missing:
        raise ValueError(f"{path}: key {missing[0]!r} is missing; expected {expected}.")


def read_record(path: Path, columns: list[str], expected: str, upgrade=lambda record: record) -> dict:
    """The JSON record at ``path`` (``upgrade``d), which must hold ``columns``; invalid JSON or a missing key fails
    naming the file."""
    try:
        record = upgrade(json.loads(Path(path).read_text()))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: is not valid JSON ({error}).") from error
    require_columns(record, columns, path, expected)
    return record


def read_csv(path: Path, columns: list[str], expected: str) -> pd.DataFrame:
    frame = pd.read_csv(path)
    require_columns(frame, columns, path, expected)
    return frame


def load_summaries(paths: list[Path]) -> pd.DataFrame:
    """One row per pretraining run, the columns of ``RUN_COLUMNS``; a missing key fails naming the file."""
    return read_records(paths, RUN_COLUMNS, "a summary written by pretrain", with_current_keys)


def read_records(paths: list[Path], columns: list[str], expected: str, upgrade=lambda record: record) -> pd.DataFrame:
    """One row per JSON record of ``paths`` (``read_record``), its ``columns``."""
    return pd.DataFrame([read_record(path, columns, expected, upgrade) for path in paths], columns=columns)


def eval_curve(summary_path: Path) -> pd.DataFrame:
    """Validation records (step, eval_loss, eval_ppl) of the ``metrics.jsonl`` beside a run's summary."""
    path = Path(summary_path).parent / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found; expected the metrics log beside {summary_path}.")
    records = [record for record in read_metrics(path) if "eval_ppl" in record]
    curve = pd.DataFrame(records, columns=["step", "eval_loss", "eval_ppl"])
    if curve.empty:
        raise ValueError(f"{path}: key 'eval_ppl' appears in no record; expected evaluation records.")
    return curve.drop_duplicates("step", keep="last").sort_values("step")


def load_downstream(paths: list[Path]) -> pd.DataFrame:
    """Rows of the ``downstream.csv`` files (none: no rows); accuracies must be fractions in [0, 1] (lm-eval's
    convention)."""
    frames = []
    for path in paths:
        frame = read_csv(path, DOWNSTREAM_COLUMNS, "a downstream.csv written by the evaluate stage")
        accuracy = frame[frame["metric"] == ACCURACY_METRIC]["value"]
        if not accuracy.between(0, 1).all():
            raise ValueError(f"{path}: key 'value' holds an accuracy outside [0, 1]; expected lm-eval fractions.")
        frames.append(frame[DOWNSTREAM_COLUMNS])
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=DOWNSTREAM_COLUMNS)


def load_memory_probes(records: list[Path]) -> tuple[pd.DataFrame, str]:
    """The memory probes as one table with a ``peak_bytes`` column and what it measures: the accelerator
    allocator's peak when every probe has one, else XLA's compiled plan of the train step (CPU)."""
    table = read_records(records, MEMORY_COLUMNS, "a record written by memory-probe")
    measured = table["device_peak_bytes"].notna().all()
    source = "device_peak_bytes" if measured else "compiled_peak_bytes"
    label = "measured allocator peak" if measured else "XLA plan of the compiled step"
    return table.assign(peak_bytes=table[source].astype(float)), label
