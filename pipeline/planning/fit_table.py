"""The fit table's rows and how ``fit`` writes them (``results/<preset>/fit.csv`` and its markdown): one typed row
per job, found by ``(run_id, gpus, device_bytes)``, and its ``plan_key`` (a hash of what the plan depends on).
Reading them, and refusing a stale row, is ``pipeline.planning.measured``'s."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from pipeline.artifacts import csv_text, markdown_table
from pipeline.config.specs import PLAN, role_values
from pipeline.execution.job_env import gpu_memory_fraction
from pipeline.planning.grid import Workload
from pipeline.train.digests import json_digest


@dataclasses.dataclass(frozen=True)
class FitRow:
    """One job's row (``role``: its workload's kind): the chosen micro-batch (examples per device per
    forward/backward) and its plan, bytes per device; ``time_embed_dim`` None for a family without one."""

    run_id: str
    plan_key: str
    role: str
    family: str
    size: str
    time_embed_dim: int | None
    seq_len: int
    batch_size: int
    gpus: int
    per_device_batch: int
    micro_batch: int
    accumulation: int
    parameters: int
    trainable_parameters: int
    param_bytes: int
    replicated_param_bytes: int
    optimizer_bytes: int
    temp_bytes: int
    total_bytes: int
    device_bytes: int
    usable_bytes: int
    fits: bool
    fits_at_paper_batch: bool

    @property
    def job_key(self) -> tuple[str, int, int]:
        """The job the row is for: ``(run_id, gpus, device_bytes)``."""
        return self.run_id, self.gpus, self.device_bytes

    @classmethod
    def from_csv(cls, row: dict[str, str]) -> FitRow:
        """A row as ``csv.DictReader`` reads it: numbers and verdicts parsed."""

        def parse(field: dataclasses.Field, value: str) -> Any:
            if field.type == "str":
                return value
            if field.type == "bool":
                return value == "True"
            return int(value) if value else None

        return cls(**{field.name: parse(field, row[field.name]) for field in dataclasses.fields(cls)})


FIT_COLUMNS = tuple(field.name for field in dataclasses.fields(FitRow))


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


GB = 1e9
MARKDOWN_COLUMNS: tuple[tuple[str, str, Callable[[FitRow], str]], ...] = (
    ("run", "l", lambda row: row.run_id),
    ("role", "l", lambda row: row.role),
    ("params", "r", lambda row: f"{row.parameters / 1e6:.0f} M"),
    ("GPUs", "r", lambda row: str(row.gpus)),
    ("GPU GB (usable)", "r", lambda row: f"{row.device_bytes / GB:.0f} ({row.usable_bytes / GB:.0f})"),
    ("batch/device", "r", lambda row: str(row.per_device_batch)),
    ("micro-batch", "r", lambda row: str(row.micro_batch)),
    ("params GB", "r", lambda row: f"{row.param_bytes / GB:.2f}"),
    ("optimizer GB", "r", lambda row: f"{row.optimizer_bytes / GB:.2f}"),
    ("temporaries GB", "r", lambda row: f"{row.temp_bytes / GB:.1f}"),
    ("total GB", "r", lambda row: f"{row.total_bytes / GB:.1f}"),
    ("fits", "l", lambda row: "yes" if row.fits_at_paper_batch else ("with accumulation" if row.fits else "no")),
)
"""The markdown table's columns: header, alignment and cell of a row; sizes in GB (10⁹ bytes) per device."""


def fit_table(rows: list[FitRow]) -> tuple[str, str]:
    """``(markdown, csv)`` of the fit rows."""
    note = (
        "Per-device memory planned on CPU by XLA (virtual devices; a train step with the run's Levanter mesh, "
        "mixed precision and batch; downstream, lm-eval's forward pass on one GPU). A step fits below the "
        f"share of the GPU's memory that a job's JAX reserves ({gpu_memory_fraction():.0%}: usable GB). "
        "micro-batch = examples per device per forward/backward (Levanter per_device_parallelism; downstream, "
        "requests per forward pass)."
    )
    columns, align, cells = zip(*MARKDOWN_COLUMNS, strict=True)
    markdown = markdown_table(columns, ([cell(row) for cell in cells] for row in rows), "".join(align))
    return f"{note}\n\n{markdown}\n", csv_text(map(dataclasses.asdict, rows), FIT_COLUMNS)
