"""What planning reads back from a preflight (``pipeline.preflight`` writes it): ``results/<preset>/preflight.csv``'s
rows by shape (or stage job), the measured training tokens/s per device of each workload, and the stop of a red row.

Rows measured on another device than the one a reader costs for (the row's ``device_label``: the site's ``device``,
or ``cpu`` without a site) are not read.
"""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

from pipeline.config.site import preset_results
from pipeline.planning.grid import Grid
from pipeline.planning.model_cost import model_cost


class PreflightError(ValueError):
    """A preflight row of a job's shape is red (its job failed, or it peaked over its memory plan); the message
    names the shape and what to do."""


def shape_id(family: str, size: str, gpus: int, micro_batch: int) -> str:
    """A training job's shape, ``<family>-<size>-g<GPUs>-mb<micro-batch>`` (micro-batch 0: the whole per-device batch
    at once): what decides its speed and memory, and what one preflight job measures."""
    return f"{family}-{size}-g{gpus}-mb{micro_batch}"


def preflight_path(preset: str) -> Path:
    """The preflight report the cost preview reads by default (``results/<preset>/preflight.csv``)."""
    return preset_results(None, preset) / "preflight.csv"


NOT_APPLICABLE = "n/a"
"""What a measured column of a job that ran holds where it does not apply to the job's kind (the training columns of
lm-eval and the analyses; the memory plan and the restore of a fine-tune)."""


def _number(text: str) -> float | None:
    """A measured column's value: None where it does not apply or was not measured (a failed job's)."""
    return None if text in ("", NOT_APPLICABLE) else float(text)


@dataclasses.dataclass(frozen=True)
class PreflightRow:
    """The columns of a report row that planning reads, typed: the row's shape (or stage job), kind, the grid job it
    measured, the device it ran on, its verdict and error, its training tokens/s per device and its peak memory
    against its budget (None where they do not apply, or its job measured nothing)."""

    shape: str
    kind: str
    run_id: str
    device_label: str
    verdict: str
    error: str
    tokens_per_s_per_device: float | None
    peak_memory_bytes: float | None
    budget_bytes: float | None

    @classmethod
    def from_csv(cls, row: dict[str, str]) -> PreflightRow:
        numbers = ("tokens_per_s_per_device", "peak_memory_bytes", "budget_bytes")
        return cls(
            **{
                field.name: _number(row[field.name]) if field.name in numbers else row[field.name]
                for field in dataclasses.fields(cls)
            }
        )


def read_rows(path: str | Path) -> dict[str, PreflightRow]:
    """The report's rows by shape id (empty without a report)."""
    path = Path(path)
    if not path.is_file():
        return {}
    with path.open(newline="") as stream:
        return {row["shape"]: PreflightRow.from_csv(row) for row in csv.DictReader(stream)}


FINETUNE_METHODS = ("lora", "full")


def finetune_stage(method: str) -> str:
    """The stage job (and row) that stands for the fine-tunes of ``method`` (one of ``FINETUNE_METHODS``)."""
    return f"finetune-{method}"


def preflight_throughput(path: str | Path, device: str, grid: Grid) -> dict[str, float]:
    """Training tokens/s per device of ``device`` of every workload of ``grid`` a green row measured, by workload id:

    - a fine-tune of a method whose stage job (``finetune_stage``) measured fine-tune m: m's model FLOP rate per
      device carried over, i.e. the method's MFU on the device: tokens/s = tokens/s_m × F_m / F, F a model's forward
      FLOPs per token (``pipeline.planning.model_cost``; tokens/s × 3F = MFU × peak), so a fine-tune to other N'
      steps, or of another source, is charged its own FLOPs;
    - else a workload whose model (family, size, num_layers) a pretraining row measured: that row's tokens/s.

    Rows of lm-eval and the analyses (which train nothing), and of a job the preset no longer has, are not read.
    """
    jobs, finetunes = grid.workloads, grid.finetunes
    by_model, flops_by_method = {}, {}
    for row in read_rows(path).values():
        measured = jobs.get(row.run_id)
        if (
            row.device_label != device
            or row.verdict != "ok"
            or measured is None
            or measured.preflight_row_kind != row.kind
        ):
            continue
        tokens_per_s = row.tokens_per_s_per_device
        if measured.run_id in finetunes:
            flops_by_method[finetunes[measured.run_id].finetune.method] = (
                tokens_per_s * model_cost(measured, grid.config)[1]
            )
        else:
            by_model[measured.throughput_key] = tokens_per_s
    throughput = {}
    for workload_id, workload in jobs.items():
        method = finetunes[workload_id].finetune.method if workload_id in finetunes else None
        if method in flops_by_method:
            throughput[workload_id] = flops_by_method[method] / model_cost(workload, grid.config)[1]
        elif workload.throughput_key in by_model:
            throughput[workload_id] = by_model[workload.throughput_key]
    return throughput


def require_green(path: str | Path, rows: dict[str, PreflightRow], row_key: str, grid_job: str) -> None:
    """Stop, in one sentence naming the preflight job, the grid's job and what to do, when the row ``row_key`` (a
    training shape, or a stage job's kind) of the report ``path`` (its ``rows``, as ``read_rows`` reads them) that
    stands for ``grid_job`` is red (its job failed, or its peak memory exceeded its plan)."""
    row = rows.get(row_key)
    if row is None or row.verdict in ("ok", "stopped"):
        return
    subject = f"shape {row_key}" if row.kind == "pretrain" else f"stage job {row_key}"
    row_file = Path(path).parent / "preflight" / ("" if row.kind == "pretrain" else "stages") / row_key / "row.json"
    rerun = f"delete {row_file} and rerun the preflight before the grid"
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
