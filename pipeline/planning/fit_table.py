"""The fit table on disk (``results/<preset>/fit.csv`` and its markdown): one row per job, found by
``(run_id, gpus, device_bytes)``. A row holds for the run as the preset defines it only while its ``plan_key`` (a
hash of what the plan depends on) and its ``usable_bytes`` are the current ones; ``stale_field`` names what
changed."""

from __future__ import annotations

import csv
import dataclasses
import logging
from pathlib import Path
from typing import Any

from pipeline.artifacts import csv_text, markdown_table
from pipeline.config.specs import PLAN, FinetuneSpec, ModelSpec, TrainSpec, role_values
from pipeline.execution.job_env import gpu_memory_fraction
from pipeline.planning.workloads import Workload
from pipeline.train.digests import json_digest

FIT_COLUMNS = (
    "run_id",
    "plan_key",
    "role",
    "family",
    "size",
    "time_embed_dim",
    "seq_len",
    "batch_size",
    "gpus",
    "per_device_batch",
    "micro_batch",
    "accumulation",
    "parameters",
    "trainable_parameters",
    "param_bytes",
    "replicated_param_bytes",
    "optimizer_bytes",
    "temp_bytes",
    "total_bytes",
    "device_bytes",
    "usable_bytes",
    "fits",
    "fits_at_paper_batch",
)
"""Per workload (``role``: its kind): the chosen micro-batch (examples per device per forward/backward) and its
plan, bytes per device."""
TEXT_COLUMNS = {"run_id", "plan_key", "role", "family", "size"}
VERDICT_COLUMNS = {"fits", "fits_at_paper_batch"}

logger = logging.getLogger(__name__)


def plan_parts(workload: Workload, vocab_size: int) -> dict[str, Any]:
    """What a workload's plan depends on: its kind, the vocabulary, the fields of role ``PLAN``
    (``pipeline.config.specs``) of its model (family, widths, depth, seq_len, D, ...), of the train step's spec
    (batch, precision, dropout) and of a fine-tune's spec (N', LoRA rank, what trains), and the train step's version
    (``TRAIN_STEP``: a changed step, e.g. with or without buffer donation, plans differently). Learning rates,
    update counts, seeds and evaluation settings leave the plan unchanged and keep the row valid; the micro-batch is
    the row's answer."""
    from pipeline.train.identity import TRAIN_STEP

    return {
        "role": workload.kind,
        "model": role_values(workload.run.model, PLAN),
        "vocab_size": vocab_size,
        "train_step": TRAIN_STEP,
        "train": role_values(workload.train, PLAN),
        "finetune": workload.finetune_role_values(PLAN),
    }


def plan_key(workload: Workload, vocab_size: int) -> str:
    """The hash of ``plan_parts``: the identity of a row's plan."""
    return json_digest(plan_parts(workload, vocab_size), length=16)


def job_key(row: dict[str, Any]) -> tuple[str, int, int]:
    """The job a row is for: ``(run_id, gpus, device_bytes)``."""
    return row["run_id"], int(row["gpus"]), int(row["device_bytes"])


def read_fit_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a fit table CSV with numbers and verdicts parsed; rows of a table from before a column existed
    are dropped (they can no longer be matched to a job), with a warning."""
    with Path(path).open(newline="") as stream:
        raw = list(csv.DictReader(stream))
    rows = [
        row
        for row in raw
        if all(row.get(column) not in (None, "") for column in FIT_COLUMNS if column != "time_embed_dim")
    ]
    if len(rows) < len(raw):
        logger.warning(
            "%s: %d row(s) lack a column of this version's table and were dropped", path, len(raw) - len(rows)
        )

    def parse(column: str, value: str) -> Any:
        if column in TEXT_COLUMNS:
            return value
        if column in VERDICT_COLUMNS:
            return value == "True"
        return int(value) if value else None

    return [{column: parse(column, row[column]) for column in FIT_COLUMNS} for row in rows]


def _plan_fields(spec_type: type, prefix: str) -> dict[str, str]:
    """The fields of role ``PLAN`` of ``spec_type`` by name, each with its preset key ``<prefix>.<name>``."""
    return {
        field.name: f"{prefix}.{field.name}"
        for field in dataclasses.fields(spec_type)
        if PLAN in field.metadata["roles"]
    }


STALE_COLUMNS = {
    column: key
    for column, key in {**_plan_fields(ModelSpec, "model"), **_plan_fields(TrainSpec, "train")}.items()
    if column in FIT_COLUMNS
}
"""Columns of a row that restate a field its ``plan_key`` covers, by the preset key they come from."""
UNRESTATED_PLAN_FIELDS = (
    "a field of its model, its vocabulary, "
    + ", ".join(key for column, key in _plan_fields(TrainSpec, "train").items() if column not in STALE_COLUMNS)
    + ", its fine-tune's "
    + "/".join(_plan_fields(FinetuneSpec, "finetune"))
    + ", or the train step's version"
)
"""What else ``plan_parts`` covers, named where no column says which changed."""


def stale_field(row: dict[str, Any], workload: Workload, vocab_size: int) -> str | None:
    """What changed since ``row`` was planned (``None``: the row holds): the first of ``STALE_COLUMNS`` whose value
    differs from the workload's now, with both values; else ``UNRESTATED_PLAN_FIELDS``."""
    if row["plan_key"] == plan_key(workload, vocab_size):
        return None
    for column, key in STALE_COLUMNS.items():
        spec = workload.run.model if key.startswith("model.") else workload.train
        if row[column] != getattr(spec, column):
            return f"{key} (planned {row[column]}, now {getattr(spec, column)})"
    return UNRESTATED_PLAN_FIELDS


def fit_table(rows: list[dict[str, Any]]) -> tuple[str, str]:
    """``(markdown, csv)`` of the fit rows; sizes in GB (10⁹ bytes) per device."""
    gb = 1e9
    note = (
        "Per-device memory planned on CPU by XLA (virtual devices; a train step with the run's Levanter mesh, "
        "mixed precision and batch; downstream, lm-eval's forward pass on one GPU). A step fits below the "
        f"share of the GPU's memory that a job's JAX reserves ({gpu_memory_fraction():.0%}: usable GB). "
        "micro-batch = examples per device per forward/backward (Levanter per_device_parallelism; downstream, "
        "requests per forward pass)."
    )
    columns = [
        "run",
        "role",
        "params",
        "GPUs",
        "GPU GB (usable)",
        "batch/device",
        "micro-batch",
        "params GB",
        "optimizer GB",
        "temporaries GB",
        "total GB",
        "fits",
    ]
    cells = [
        [
            row["run_id"],
            row["role"],
            f"{row['parameters'] / 1e6:.0f} M",
            str(row["gpus"]),
            f"{row['device_bytes'] / gb:.0f} ({row['usable_bytes'] / gb:.0f})",
            str(row["per_device_batch"]),
            str(row["micro_batch"]),
            f"{row['param_bytes'] / gb:.2f}",
            f"{row['optimizer_bytes'] / gb:.2f}",
            f"{row['temp_bytes'] / gb:.1f}",
            f"{row['total_bytes'] / gb:.1f}",
            "yes" if row["fits_at_paper_batch"] else ("with accumulation" if row["fits"] else "no"),
        ]
        for row in rows
    ]
    return f"{note}\n\n{markdown_table(columns, cells, align='llrrrrrrrrrl')}\n", csv_text(rows, FIT_COLUMNS)
