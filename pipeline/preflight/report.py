"""The preflight report (docs/cluster.md#preflight): a row per job shape, and its projection onto every pretraining
run: GPU-hours = tokens / (measured tokens/s per device × 3600), walltime = GPU-hours × safety factor / GPUs, next to
the estimate they replace (the device's throughput table where it has the run, else the FLOPs estimate)."""

import html
import math
from typing import Any

from pipeline.artifacts import markdown_table
from pipeline.planning.measured import NOT_APPLICABLE

IDENTITY_COLUMNS = ("shape", "kind", "run_id", "runs", "device_label", "status", "error")
MEASURED_COLUMNS = (
    "jax",
    "jaxlib",
    "cuda_plugin",
    "driver",
    "platform_version",
    "backend",
    "device_kind",
    "devices",
    "micro_batch",
    "gradient_accumulation",
    "warmup_updates",
    "timed_updates",
    "compile_s",
    "median_step_s",
    "tokens_per_s",
    "tokens_per_s_per_device",
    "flops_per_token",
    "peak_flops",
    "peak_source",
    "mfu",
    "peak_memory_bytes",
    "memory_source",
    "planned_bytes",
    "budget_bytes",
    "plan_source",
    "checkpoint_save_s",
    "checkpoint_bytes",
    "restore_s",
    "input_wait_s",
    "wall_s",
)
"""What a job measured, by concern: software and devices, micro-batch and step time, throughput, memory, checkpoint
and the rest."""
COLUMNS = (*IDENTITY_COLUMNS, *MEASURED_COLUMNS, "verdict")
RED_VERDICTS = ("failed", "over plan")
"""Verdicts that stop the grid's runs of the row's shape (or stage kind)."""
PROJECTION_COLUMNS = (
    "run_id",
    "shape",
    "tokens",
    "estimated_gpu_hours",
    "measured_gpu_hours",
    "gpus",
    "measured_walltime_h",
)
PROJECTION_TITLE = "Projection of the grid from the measured throughput"


def verdict(row: dict[str, Any]) -> str:
    """ "ok"; "stopped" where the job's walltime stopped it before it measured (not red: nothing says the shape
    fails); or why the row is red: its job failed, or its peak memory exceeded its budget."""
    if row["status"] != "ok":
        return "stopped" if row["status"] == "stopped" else "failed"
    budget = row.get("budget_bytes", NOT_APPLICABLE)
    return "over plan" if budget != NOT_APPLICABLE and float(row["peak_memory_bytes"]) > float(budget) else "ok"


def with_verdicts(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every column of every row: a job that ran holds ``NOT_APPLICABLE`` in a column of no meaning for its kind, a
    failed job nothing in what it did not measure."""

    def filled(row: dict[str, Any]) -> dict[str, Any]:
        missing = NOT_APPLICABLE if row["status"] == "ok" else ""
        row = {"kind": "pretrain", "error": "", **row}
        return {**{column: row.get(column, missing) for column in COLUMNS[:-1]}, "verdict": verdict(row)}

    return [filled(row) for row in rows]


def _cells(item: dict[str, Any], columns: tuple[str, ...]) -> list[str]:
    """An item's cells under ``columns``: a finite float to 4 significant digits, anything else as text, ``|`` as
    ``/`` (the Markdown table's separator)."""
    values = [item[column] for column in columns]
    return [f"{v:.4g}" if isinstance(v, float) and math.isfinite(v) else str(v).replace("|", "/") for v in values]


def markdown(rows: list[dict[str, Any]], projection: list[dict[str, Any]]) -> str:
    """The report: the shapes (red rows first named), then the projection of the grid."""
    red = [row for row in rows if row["verdict"] in RED_VERDICTS]
    stopped = [row["shape"] for row in rows if row["verdict"] == "stopped"]
    paragraphs = [
        "# Preflight",
        f"{len(rows)} preflight job(s); {len(red)} red."
        + (
            " If a row is red, stop here: fix it (the row's error, or a smaller micro-batch: rerun `fit`), delete "
            "its `preflight/<shape>/row.json` and rerun the preflight."
            if red
            else " Every job ran, every training shape within its memory plan."
            if not stopped
            else ""
        )
        + (f" Stopped by walltime before they measured (not red): {', '.join(stopped)}." if stopped else ""),
        f"{NOT_APPLICABLE}: the column does not apply to the job's kind (lm-eval and the analyses train "
        "nothing; a fine-tune is neither planned against a fit row nor restarted).",
        markdown_table(COLUMNS, [_cells(row, COLUMNS) for row in rows]),
        f"## {PROJECTION_TITLE}",
        markdown_table(PROJECTION_COLUMNS, [_cells(row, PROJECTION_COLUMNS) for row in projection]),
    ]
    return "\n\n".join(paragraphs) + "\n"


def _html_table(items: list[dict[str, Any]], columns: tuple[str, ...]) -> str:
    """``items`` as an HTML table under ``columns``, red rows shaded."""
    head = "".join(f"<th>{html.escape(column)}</th>" for column in columns)
    body = "".join(
        ('<tr style="background:#fbb">' if item.get("verdict", "ok") in RED_VERDICTS else "<tr>")
        + "".join(f"<td>{html.escape(cell)}</td>" for cell in _cells(item, columns))
        + "</tr>"
        for item in items
    )
    return f"<table border=1><tr>{head}</tr>{body}</table>"


def html_page(rows: list[dict[str, Any]], projection: list[dict[str, Any]]) -> str:
    """The same two tables as HTML (for the Snakemake report)."""
    tables = f"{_html_table(rows, COLUMNS)}<h2>{PROJECTION_TITLE}</h2>{_html_table(projection, PROJECTION_COLUMNS)}"
    return f"<html><body><h1>Preflight</h1>{tables}</body></html>\n"


def projection_rows(
    cost_rows: list[dict[str, Any]], shapes: dict[str, dict[str, Any]], rows: list[dict[str, Any]], safety_factor: float
) -> list[dict[str, Any]]:
    """Per pretraining run (``cost_rows``: their estimates) with a measured shape (``shapes``: each shape's ``runs``
    and ``gpus``): the estimated and the measured GPU-hours and walltime (module docstring)."""
    run_shapes = {run: shape for shape, item in shapes.items() for run in item["runs"]}
    measured = {
        row["shape"]: float(row["tokens_per_s_per_device"])
        for row in rows
        if row["status"] == "ok" and row["kind"] == "pretrain"
    }
    projected = []
    for cost in cost_rows:
        shape = run_shapes.get(cost["run_id"])
        if shape not in measured:
            continue
        hours = cost["tokens"] / measured[shape] / 3600
        gpus = max(shapes[shape]["gpus"], 1)
        values = (cost["run_id"], shape, cost["tokens"], cost["gpu_hours"], hours, gpus, hours * safety_factor / gpus)
        projected.append(dict(zip(PROJECTION_COLUMNS, values, strict=True)))
    return projected
