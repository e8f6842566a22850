"""What planning knows of a job on the site's GPUs before it runs (``MeasuredTable.job``), and the only reader of the
files that hold it (docs/planning.md#the-measured-table: their precedence and staleness); where nothing was measured,
the training rate estimated from the GPU's datasheet (``DEVICES``). Longer than 300 lines because a fit row's type
lives with the staleness check that reads it, and the estimate with the rates it stands in for."""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import logging
import math
from pathlib import Path
from typing import Any

from pipeline.config.paths import BENCHMARKS_DIR
from pipeline.config.specs import PLAN, FinetuneSpec, ModelSpec, TrainSpec
from pipeline.execution.job_env import GPU_MEMORY_FRACTION_ENV, gpu_memory_fraction
from pipeline.planning.grid import TRAIN_PASSES, Grid, Workload

logger = logging.getLogger(__name__)
THROUGHPUT_COLUMNS = (
    "device",
    "family",
    "size",
    "hidden_dim",
    "num_layers",
    "seq_len",
    "params",
    "tokens_per_s_per_gpu",
    "measured_on",
    "notes",
)
"""Columns of ``bench throughput-sizes``' table (one row per device, family and size)."""


def default_throughput_path(device: str) -> Path:
    """``bench throughput-sizes``' table of ``device``."""
    return BENCHMARKS_DIR / f"throughput-sizes-{device}.csv"


@dataclasses.dataclass(frozen=True)
class Device:
    """One GPU from NVIDIA's datasheets (SXM): memory and dense peak TFLOP/s by compute precision (``f32``: TF32)."""

    memory_bytes: int
    peak_tflops: dict[str, float]


DEFAULT_MFU = 0.4
"""Model FLOPs utilisation an estimate assumes where nothing was measured."""
DEVICES = {
    "a100": Device(memory_bytes=80 * 10**9, peak_tflops={"bf16": 312.0, "f32": 156.0}),
    "h100": Device(memory_bytes=80 * 10**9, peak_tflops={"bf16": 989.0, "f32": 494.7}),
    "h200": Device(memory_bytes=141 * 10**9, peak_tflops={"bf16": 989.0, "f32": 494.7}),
}


class PreflightError(ValueError):
    """A preflight row is red (its job failed, or peaked over its memory plan); names the shape and what to do."""


class FitTableError(ValueError):
    """A training job or memory probe has no usable fit row (missing, stale, or fits at no micro-batch)."""


PLAN_ROW = "plan it with `snakemake --profile profiles/slurm fit` and this call's --config"
"""How a sentence refusing a fit row ends: the command that plans the table (docs/cluster.md#fit-on-a-cluster)."""


NOT_APPLICABLE = "n/a"
"""A report column that does not apply to its job's kind (lm-eval's training columns, a fine-tune's restore)."""


def typed_row(cls: type, row: dict[str, str]) -> Any:
    """A ``cls`` (``PreflightRow``, ``FitRow``) from a row as ``csv.DictReader`` reads it, each column parsed as its
    field's type; a number None where empty or ``NOT_APPLICABLE`` (not measured, or not of its job's kind)."""

    def parse(field: dataclasses.Field, value: str) -> Any:
        if field.type in ("str", "bool"):
            return value if field.type == "str" else value == "True"
        if value in ("", NOT_APPLICABLE):
            return None
        return float(value) if field.type.startswith("float") else int(value)

    return cls(**{field.name: parse(field, row[field.name]) for field in dataclasses.fields(cls)})


@dataclasses.dataclass(frozen=True)
class PreflightRow:
    """The columns of a report row that planning reads, typed."""

    shape: str
    kind: str
    run_id: str
    device_label: str
    verdict: str
    error: str
    tokens_per_s_per_device: float | None
    peak_memory_bytes: float | None
    budget_bytes: float | None


def read_throughput(path: Path, device: str) -> dict[tuple[str, str, int], float]:
    """``bench throughput-sizes``' training tokens/s per GPU of ``device``, keyed by (family, size, num_layers)."""
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no throughput table; measure one with `python -m pipeline bench throughput-sizes`."
        )
    reader = csv.DictReader(io.StringIO(path.read_text()))
    missing = [column for column in THROUGHPUT_COLUMNS if column not in (reader.fieldnames or [])]
    if missing:
        raise ValueError(f"{path}: missing column {missing[0]!r}; expected the columns {list(THROUGHPUT_COLUMNS)}.")
    table: dict[tuple[str, str, int], float] = {}
    for line, row in enumerate(reader, start=2):
        if row["device"] != device:
            continue
        for column in ("num_layers", "tokens_per_s_per_gpu"):
            try:
                value = float(row[column])
            except (TypeError, ValueError):
                value = math.nan
            if not value > 0 or (column == "num_layers" and not value.is_integer()):
                raise ValueError(
                    f"{path}: column {column!r} must hold a positive number on line {line} (got {row[column]!r})."
                )
        key = (row["family"], row["size"], int(row["num_layers"]))
        if key in table:
            raise ValueError(
                f"{path}: line {line} repeats family {key[0]!r}, size {key[1]!r}, num_layers {key[2]} "
                f"for device {device!r}; expected one row each."
            )
        table[key] = float(row["tokens_per_s_per_gpu"])
    if not table:
        raise ValueError(f"{path}: column 'device' has no row for device {device!r}.")
    return table


@dataclasses.dataclass(frozen=True)
class FitRow:
    """One job's fit row (``role``: its workload's kind): its micro-batch and plan, bytes per device."""

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
        return self.run_id, self.gpus, self.device_bytes

    @classmethod
    def planned(
        cls, workload: Workload, gpus: int, device_bytes: int, micro_batch: int, plan: dict[str, int]
    ) -> FitRow:
        """The row of ``workload`` on ``gpus`` GPUs of ``device_bytes`` at ``micro_batch`` from XLA's ``plan`` (its
        parameter counts and bytes per device, ``pipeline.planning.xla_plans``): it fits where the plan's total is
        within the share of the memory JAX reserves, at the paper's batch where it fits at the whole per-device
        batch."""
        devices, model = workload.devices(gpus), workload.run.model
        per_device, usable = workload.batch_size // devices, int(device_bytes * gpu_memory_fraction())
        fits = plan["total_bytes"] <= usable
        return cls(
            run_id=workload.run_id,
            plan_key=workload.plan_key,
            role=workload.kind,
            family=model.family,
            size=workload.run.size,
            time_embed_dim=model.time_embed_dim,
            seq_len=model.seq_len,
            batch_size=workload.batch_size,
            gpus=devices,
            per_device_batch=per_device,
            micro_batch=micro_batch,
            accumulation=per_device // micro_batch,
            **plan,
            device_bytes=device_bytes,
            usable_bytes=usable,
            fits=fits,
            fits_at_paper_batch=fits and micro_batch == per_device,
        )


FIT_COLUMNS = tuple(field.name for field in dataclasses.fields(FitRow))


def read_fit_rows(path: Path) -> list[FitRow]:
    """The rows of a fit table CSV, typed; rows lacking a column (an older table: no job to match) dropped, warned."""
    with Path(path).open(newline="") as stream:
        raw = list(csv.DictReader(stream))
    required = [column for column in FIT_COLUMNS if column != "time_embed_dim"]
    rows = [row for row in raw if all(row.get(column) not in (None, "") for column in required)]
    if dropped := len(raw) - len(rows):
        logger.warning("%s: %d row(s) lack a column of this version's table and were dropped", path, dropped)
    return [typed_row(FitRow, row) for row in rows]


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
"""Columns of a row that restate a field its ``Workload.plan_key`` covers, by the preset key they come from."""
UNRESTATED_PLAN_FIELDS = (
    "a field of its model, its vocabulary, "
    + ", ".join(key for column, key in _plan_fields(TrainSpec, "train").items() if column not in STALE_COLUMNS)
    + ", its fine-tune's "
    + "/".join(_plan_fields(FinetuneSpec, "finetune"))
    + ", or the train step's version"
)
"""What else ``Workload.plan_key`` covers, named where no column says which changed."""


def stale_field(row: FitRow, workload: Workload) -> str | None:
    """What changed since ``row`` was planned (``None``: nothing): the first differing ``STALE_COLUMNS`` with both
    values, else ``UNRESTATED_PLAN_FIELDS``."""
    if row.plan_key == workload.plan_key:
        return None
    for column, key in STALE_COLUMNS.items():
        spec = workload.run.model if key.startswith("model.") else workload.train
        if getattr(row, column) != getattr(spec, column):
            return f"{key} (planned {getattr(row, column)}, now {getattr(spec, column)})"
    return UNRESTATED_PLAN_FIELDS


@dataclasses.dataclass(frozen=True)
class MeasuredJob:
    """What the table answers for one job on its device: training tokens/s per GPU from ``source`` (``preflight``,
    ``measured`` or ``estimate``; both None where nothing was measured and the device has no datasheet), its
    GPU-hours at that rate, and by GPU count its fit rows at the GPU's memory, or the sentence refusing one."""

    tokens_per_s: float | None
    source: str | None
    gpu_hours: float | None
    fit_rows: dict[int, FitRow]
    refused: dict[int, str]


@dataclasses.dataclass(eq=False)
class MeasuredTable:
    """The measured table of ``grid``'s jobs on ``device``, each file read once: ``throughput_table`` (None: the
    device's default table, where it exists), ``preflight_table`` and ``fit_table`` (None or missing: nothing measured
    or planned); ``mfu``: the estimate's."""

    grid: Grid
    device: str
    _: dataclasses.KW_ONLY
    mfu: float = DEFAULT_MFU
    preflight_table: str | Path | None = None
    fit_table: str | Path | None = None
    throughput_table: Path | None = None

    @functools.cached_property
    def preflight_rows(self) -> dict[str, PreflightRow]:
        """The report's rows by shape id (empty without a report)."""
        if self.preflight_table is None or not Path(self.preflight_table).is_file():
            return {}
        with Path(self.preflight_table).open(newline="") as stream:
            return {row["shape"]: typed_row(PreflightRow, row) for row in csv.DictReader(stream)}

    @functools.cached_property
    def throughput_rows(self) -> dict[tuple[str, str, int], float]:
        path = self.throughput_table or default_throughput_path(self.device)
        return read_throughput(path, self.device) if self.throughput_table or path.is_file() else {}

    @functools.cached_property
    def fit_rows_by_job(self) -> dict[tuple[str, int], list[FitRow]]:
        """The fit table's rows by run id and GPU memory (bytes)."""
        rows: dict[tuple[str, int], list[FitRow]] = {}
        if self.fit_table is not None and Path(self.fit_table).is_file():
            for row in read_fit_rows(Path(self.fit_table)):
                rows.setdefault((row.run_id, row.device_bytes), []).append(row)
        return rows

    @functools.cached_property
    def preflight_tokens_per_s(self) -> dict[str, float]:
        """Training tokens/s per device by workload id from the green rows of ``device``
        (docs/planning.md#after-a-preflight): a fine-tune of method m's, tokens/s_m × F_m / F (F: forward FLOPs per
        token), else its model's pretraining row's; rows of lm-eval, analyses and jobs no longer in the grid unread."""
        jobs, finetunes = self.grid.workloads, self.grid.finetunes
        rates = {}  # a model's tokens/s by its throughput key; a fine-tune method's FLOP rate by its row kind
        for row in self.preflight_rows.values():
            job = jobs.get(row.run_id)
            if job is None or (row.device_label, row.verdict, row.kind) != (self.device, "ok", job.preflight_row_kind):
                continue
            if job.run_id in finetunes:
                rates[row.kind] = row.tokens_per_s_per_device * job.forward_flops
            else:
                rates[job.throughput_key] = row.tokens_per_s_per_device
        throughput = {}
        for workload_id, workload in jobs.items():
            if workload_id in finetunes and workload.preflight_row_kind in rates:
                throughput[workload_id] = rates[workload.preflight_row_kind] / workload.forward_flops
            elif workload.throughput_key in rates:
                throughput[workload_id] = rates[workload.throughput_key]
        return throughput

    def tokens_per_s(self, workload: Workload) -> tuple[float, str] | None:
        """``(training tokens/s per GPU, "preflight" or "measured")`` of ``workload``; None: nothing measured (``job``
        estimates)."""
        if workload.run_id in self.preflight_tokens_per_s:
            return self.preflight_tokens_per_s[workload.run_id], "preflight"
        if workload.throughput_key in self.throughput_rows:
            return self.throughput_rows[workload.throughput_key], "measured"
        return None

    def job(self, workload: Workload, device_bytes: int | None = None, required: bool = False) -> MeasuredJob:
        """``workload``'s answer: its measured tokens/s (``tokens_per_s``), else on a ``DEVICES`` GPU MFU × peak FLOP/s
        in the compute dtype of its mixed precision / (3 × forward FLOPs per token) (neither and ``required``:
        ``ValueError``); GPU-hours = tokens × passes / 3 / tokens/s / 3600 (a forward-only token costs a third); its
        fit rows of ``device_bytes`` per GPU."""
        rate = self.tokens_per_s(workload)
        if rate is None and required and self.device not in DEVICES:
            family, size, layers = workload.throughput_key
            raise ValueError(
                f"--device {self.device!r} has no measured throughput for {workload.model_id} (family {family!r}, "
                f"size {size!r}, num_layers {layers}) and no peak FLOP/s to estimate from; expected a "
                f"device in {sorted(DEVICES)} or a measured row."
            )
        if rate is None and self.device in DEVICES:
            import jax.numpy as jnp
            import jmp

            compute = jmp.get_policy(workload.train.mixed_precision).compute_dtype
            peak = DEVICES[self.device].peak_tflops["bf16" if compute in (jnp.bfloat16, jnp.float16) else "f32"]
            rate = self.mfu * peak * 1e12 / (TRAIN_PASSES * workload.forward_flops), "estimate"
        tokens_per_s, source = rate or (None, None)
        hours = None if tokens_per_s is None else workload.tokens * workload.passes / TRAIN_PASSES / tokens_per_s / 3600
        rows, refused = {}, {}
        for row in self.fit_rows_by_job.get((workload.run_id, device_bytes), []):
            changed, usable = stale_field(row, workload), int(row.device_bytes * gpu_memory_fraction())
            where = f"{self.fit_table}: the row of {workload.run_id} on {row.gpus} GPU(s)"
            if changed is not None:
                refused[row.gpus] = f"{where} is stale: {changed} changed since it was planned; {PLAN_ROW}."
            elif row.usable_bytes != usable:
                refused[row.gpus] = (
                    f"{where} was planned for {row.usable_bytes / 1e9:g} GB usable per GPU, but JAX now reserves "
                    f"{usable / 1e9:g} GB ({GPU_MEMORY_FRACTION_ENV}); {PLAN_ROW}."
                )
            else:
                rows[row.gpus] = row
        return MeasuredJob(tokens_per_s, source, hours, rows, refused)

    def require_green(self) -> None:
        """``PreflightError`` naming the preflight job, the grid job it measured and what to do, while a row is red."""
        row = next((row for row in self.preflight_rows.values() if row.verdict not in ("ok", "stopped")), None)
        if row is None:
            return
        path = Path(self.preflight_table)
        subject = f"shape {row.shape}" if row.kind == "pretrain" else f"stage job {row.shape}"
        grid_job = f"run {row.run_id}" if row.kind == "pretrain" else f"{row.kind} of run {row.run_id}"
        row_file = path.parent / "preflight" / ("" if row.kind == "pretrain" else "stages") / row.shape / "row.json"
        rerun = f"delete {row_file} and {path}, and run the command again: it reruns that job before the grid"
        if row.verdict == "failed":
            raise PreflightError(
                f"{path}: the preflight of {subject} ({grid_job}) failed ({row.error}); fix that, {rerun}."
            )
        raise PreflightError(
            f"{path}: the preflight of {subject} ({grid_job}) peaked at "
            f"{row.peak_memory_bytes / 1e9:.3g} GB, over its plan's "
            f"{row.budget_bytes / 1e9:.3g} GB; set a smaller micro-batch "
            f"(train.micro_batch_size, or rerun `fit`), then {rerun}."
        )
