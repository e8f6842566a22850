"""The fit table's rows and how ``fit`` writes them (``results/<preset>/fit.csv`` and its markdown): one typed row
per job, found by ``(run_id, gpus, device_bytes)``, and its ``plan_key`` (a hash of what the plan depends on).
Reading them, and refusing a stale row, is ``pipeline.planning.measured``'s."""

from __future__ import annotations

import dataclasses
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


def fit_table(rows: list[FitRow]) -> tuple[str, str]:
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
            row.run_id,
            row.role,
            f"{row.parameters / 1e6:.0f} M",
            str(row.gpus),
            f"{row.device_bytes / gb:.0f} ({row.usable_bytes / gb:.0f})",
            str(row.per_device_batch),
            str(row.micro_batch),
            f"{row.param_bytes / gb:.2f}",
            f"{row.optimizer_bytes / gb:.2f}",
            f"{row.temp_bytes / gb:.1f}",
            f"{row.total_bytes / gb:.1f}",
            "yes" if row.fits_at_paper_batch else ("with accumulation" if row.fits else "no"),
        ]
        for row in rows
    ]
    return f"{note}\n\n{markdown_table(columns, cells, align='llrrrrrrrrrl')}\n", csv_text(
        map(dataclasses.asdict, rows), FIT_COLUMNS
    )
