"""What planning reads back from a preflight (``pipeline.preflight`` writes it): ``results/<preset>/preflight.csv``'s
rows by shape, the measured training tokens/s per device of each model, and the stop of a red row.

Rows measured on another device than the one a reader costs for (the row's ``device_label``: the site's ``device``,
or ``cpu`` without a site) are not read.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from pipeline.config import REPO_ROOT, RunSpec


class PreflightError(ValueError):
    """A preflight row of a job's shape is red (its job failed, or it peaked over its memory plan); the message
    names the shape and what to do."""


def shape_id(family: str, size: str, gpus: int, micro_batch: int) -> str:
    """A training job's shape, ``<family>-<size>-g<GPUs>-mb<micro-batch>`` (micro-batch 0: the whole per-device batch
    at once): what decides its speed and memory, and what one preflight job measures."""
    return f"{family}-{size}-g{gpus}-mb{micro_batch}"


def preflight_path(preset: str) -> Path:
    """The preflight report the cost preview reads by default (``results/<preset>/preflight.csv``)."""
    return REPO_ROOT / "results" / preset / "preflight.csv"


def read_rows(path: str | Path) -> dict[str, dict[str, Any]]:
    """The report's rows by shape id (empty without a report)."""
    path = Path(path)
    if not path.is_file():
        return {}
    with path.open(newline="") as stream:
        return {row["shape"]: row for row in csv.DictReader(stream)}


def measured_throughput(path: str | Path, device: str, runs: dict[str, RunSpec]) -> dict[tuple[str, str, int], float]:
    """Training tokens/s per device of every model a green row of ``device`` measured, keyed as the cost model's
    measured table (family, size, num_layers)."""
    throughput = {}
    for row in read_rows(path).values():
        if row["device_label"] != device or row["verdict"] != "ok" or row.get("kind", "pretrain") != "pretrain":
            continue
        spec = runs[row["run_id"]]
        throughput[spec.model.family, spec.size, spec.model.num_layers] = float(row["tokens_per_s_per_device"])
    return throughput


def require_green(path: str | Path, shape: str, run_id: str) -> None:
    """Stop, in one sentence naming the shape and what to do, when the preflight row of ``run_id``'s ``shape`` is
    red (its job failed, or its peak memory exceeded its plan)."""
    row = read_rows(path).get(shape)
    if row is None or row["verdict"] == "ok":
        return
    if row["verdict"] == "failed":
        raise PreflightError(f"{path}: the preflight of shape {shape} (run {run_id}) failed ({row['error']}); fix that "
                         f"and rerun the preflight before the grid.")
    raise PreflightError(f"{path}: the preflight of shape {shape} (run {run_id}) peaked at "
                     f"{float(row['peak_memory_bytes']) / 1e9:.3g} GB, over its plan's "
                     f"{float(row['budget_bytes']) / 1e9:.3g} GB; set a smaller micro-batch (train.micro_batch_size, "
                     f"or rerun `fit`), then rerun the preflight before the grid.")
