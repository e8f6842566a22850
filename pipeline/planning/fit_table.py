"""The fit table on disk (``results/<preset>/fit.csv`` and its markdown): one row per job, found by
``(run_id, gpus, device_bytes)``. A row holds for the run as the preset defines it only while its ``plan_key`` (a
hash of what the plan depends on) and its ``usable_bytes`` are the current ones; ``stale_field`` names what
changed."""

from __future__ import annotations

import csv
import dataclasses
import io
import logging
from pathlib import Path
from typing import Any

from pipeline.digests import json_digest
from pipeline.execution.job_env import gpu_memory_fraction
from pipeline.planning.workloads import Workload

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
PLAN_TRAIN_FIELDS = ("batch_size", "mixed_precision", "dropout")
PLAN_FINETUNE_FIELDS = ("source_steps", "num_steps", "method", "lora_rank", "train_embeddings")

logger = logging.getLogger(__name__)


def plan_parts(workload: Workload, vocab_size: int) -> dict[str, Any]:
    """What a workload's plan depends on: its kind, its model (every field of the run's ``ModelSpec``: family,
    widths, depth, seq_len, D, ...), the vocabulary, the train step's ``PLAN_TRAIN_FIELDS``, a fine-tune's
    ``PLAN_FINETUNE_FIELDS`` (N', LoRA rank, what trains), and the train step's version (``TRAIN_STEP``: a changed
    step, e.g. with or without buffer donation, plans differently). Learning rates, step counts, seeds and
    evaluation settings leave the plan unchanged and keep the row valid; the micro-batch is the row's answer."""
    from pipeline.train.identity import TRAIN_STEP

    return {
        "role": workload.kind,
        "model": dataclasses.asdict(workload.run.model),
        "vocab_size": vocab_size,
        "train_step": TRAIN_STEP,
        "train": {field: getattr(workload.train, field) for field in PLAN_TRAIN_FIELDS},
        "finetune": workload.finetune_fields(PLAN_FINETUNE_FIELDS),
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


STALE_COLUMNS = {
    "family": "model.family",
    "size": "size",
    "time_embed_dim": "model.time_embed_dim",
    "seq_len": "model.seq_len",
    "batch_size": "train.batch_size",
}
"""Columns of a row that restate a field its ``plan_key`` covers, by the preset key they come from."""


def stale_field(row: dict[str, Any], workload: Workload, vocab_size: int) -> str | None:
    """What changed since ``row`` was planned (``None``: the row holds): the first of ``STALE_COLUMNS`` whose value
    differs from the run's now, with both values; else the parts of ``plan_parts`` that no column restates."""
    if row["plan_key"] == plan_key(workload, vocab_size):
        return None
    current = {
        "family": workload.run.model.family,
        "size": workload.run.size,
        "time_embed_dim": workload.run.model.time_embed_dim,
        "seq_len": workload.run.model.seq_len,
        "batch_size": workload.batch_size,
    }
    for column, key in STALE_COLUMNS.items():
        if row[column] != current[column]:
            return f"{key} (planned {row[column]}, now {current[column]})"
    return (
        "a field of its model, its vocabulary, train.mixed_precision, train.dropout, its fine-tune's "
        "N'/method/LoRA rank, or the train step's version"
    )


def fit_table(rows: list[dict[str, Any]]) -> tuple[str, str]:
    """``(markdown, csv)`` of the fit rows; sizes in GB (10⁹ bytes) per device."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=FIT_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    gb = 1e9
    lines = [
        "Per-device memory planned on CPU by XLA (virtual devices; a train step with the run's Levanter mesh, "
        "mixed precision and batch; downstream, lm-eval's forward pass on one GPU). A step fits below the "
        f"share of the GPU's memory that a job's JAX reserves ({gpu_memory_fraction():.0%}: usable GB). "
        "micro-batch = examples per device per forward/backward (Levanter per_device_parallelism; downstream, "
        "requests per forward pass).",
        "",
        "| run | role | params | GPUs | GPU GB (usable) | batch/device | micro-batch | params GB | optimizer GB "
        "| temporaries GB | total GB | fits |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        verdict = "yes" if row["fits_at_paper_batch"] else ("with accumulation" if row["fits"] else "no")
        lines.append(
            f"| {row['run_id']} | {row['role']} | {row['parameters'] / 1e6:.0f} M | {row['gpus']} "
            f"| {row['device_bytes'] / gb:.0f} ({row['usable_bytes'] / gb:.0f}) "
            f"| {row['per_device_batch']} | {row['micro_batch']} | {row['param_bytes'] / gb:.2f} "
            f"| {row['optimizer_bytes'] / gb:.2f} | {row['temp_bytes'] / gb:.1f} "
            f"| {row['total_bytes'] / gb:.1f} | {verdict} |"
        )
    return "\n".join(lines) + "\n", buffer.getvalue()
