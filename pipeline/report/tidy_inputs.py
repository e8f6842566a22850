"""The stages' tidy files as the report reads them, each missing file or key failing with one sentence naming it:
run summaries (``RUN_COLUMNS``, ``FINETUNE_KEYS``), validation curves (``pretrain_curves``, ``finetune_runs``),
lm-eval's ``downstream.csv``, memory probes, and ``read_csv``."""

import json
from pathlib import Path

import pandas as pd
import yaml

from pipeline.analysis.memory import MEMORY_COLUMNS
from pipeline.artifacts import read_metrics, with_current_keys
from pipeline.config.families import DIFFEQ_FAMILIES, FAMILY_LABELS
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
    """Validation records (step, eval_loss, eval_ppl) of the ``metrics.jsonl`` beside a run's summary, read as
    ``artifacts.read_metrics`` reads every run's log (a torn last line dropped with a warning, an earlier one an
    error)."""
    path = Path(summary_path).parent / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found; expected the metrics log beside {summary_path}.")
    records = [record for record in read_metrics(path) if "eval_ppl" in record]
    curve = pd.DataFrame(records, columns=["step", "eval_loss", "eval_ppl"])
    if curve.empty:
        raise ValueError(f"{path}: key 'eval_ppl' appears in no record; expected evaluation records.")
    return curve.drop_duplicates("step", keep="last").sort_values("step")


def pretrain_curves(summaries: list[Path]) -> pd.DataFrame:
    """Validation curves of pretraining runs, one row per (run, eval step), with the run's spec columns
    (family label, dataset, size, ablation, Adam β2, D, shared time MLP) from its ``config.yaml``."""
    identity = ["run_id", "family", "dataset", "size"]
    frames = []
    for path in summaries:
        summary = read_record(path, [*identity, "val_ppl", "mean_tokens_per_s"], "a summary written by pretrain")
        spec = yaml.safe_load((Path(path).parent / "config.yaml").read_text())
        curve = eval_curve(path).assign(
            **{key: summary[key] for key in identity},
            model=FAMILY_LABELS[summary["family"]],
            final_val_ppl=summary["val_ppl"],
            tokens_per_s=summary["mean_tokens_per_s"],
            beta2=spec["train"]["beta2"],
            time_embed_dim=spec["model"].get("time_embed_dim"),
            shared_time_mlp=bool(spec["model"].get("shared_time_mlp")),
        )
        frames.append(curve)
    return pd.concat(frames, ignore_index=True)


def finetune_runs(summaries: list[Path]) -> pd.DataFrame:
    """Evaluation curves on the target dataset of the step-resampling fine-tunes (§6.2; split ``eval_split``), one
    row per (run, step), labelled 'DiffEqFormer L→N′' or 'GPT-L'."""
    frames = []
    for path in summaries:
        summary = read_record(path, FINETUNE_KEYS, "a fine-tune summary written by the finetune stage")
        label = (
            f"DiffEqFormer {summary['source_steps']}→{summary['num_steps']}"
            if summary["family"] in DIFFEQ_FAMILIES
            else f"{FAMILY_LABELS.get(summary['family'], summary['family'])}-{summary['num_steps']}"
        )
        frames.append(eval_curve(path).assign(**{column: summary[column] for column in FINETUNE_KEYS}, label=label))
    return pd.concat(frames, ignore_index=True)


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
