"""Fit preview: does every job fit in one GPU's memory, planned on CPU by XLA before anything runs
(docs/planning.md#does-every-run-fit, which says what each row plans): one row per workload (``FitRow.planned``),
from XLA's per-device plans in child processes, since JAX fixes the virtual device count when it starts
(``fit_rows``: which plans share a process, the micro-batch search, and the rows kept for a resumed fit)."""

import dataclasses
import json
import logging
import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.artifacts import atomic_write_text, csv_text, markdown_table
from pipeline.config.site import Site
from pipeline.execution.errors import RunStopped
from pipeline.execution.job_env import gpu_memory_fraction
from pipeline.execution.progress import Progress
from pipeline.execution.stop_signals import StopSignals
from pipeline.planning.grid import Grid, Workload
from pipeline.planning.measured import DEVICES, FIT_COLUMNS, FitRow, read_fit_rows
from pipeline.train.digests import json_digest

logger = logging.getLogger(__name__)
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


def plans_in_subprocess(requests: list[tuple[Workload, int]], gpus: int, stop: StopSignals) -> list[dict[str, int]]:
    """The plan of each ``(workload, micro_batch)`` request (downstream: ``micro_batch`` requests per
    forward pass), in order, in one fresh Python process whose JAX sees ``gpus`` virtual CPU devices, which a
    ``stop`` signal ends at once."""
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={gpus}".strip(),
    }
    command = [sys.executable, "-m", "pipeline.planning.xla_plans"]
    pipes = dict.fromkeys(("stdin", "stdout", "stderr"), subprocess.PIPE)
    with subprocess.Popen(command, env=env, **pipes) as child:
        stop.on_stop = lambda _: child.terminate()
        stdout, stderr = child.communicate(pickle.dumps(requests))
    if child.returncode != 0:
        lines = stderr.decode(errors="replace").strip().splitlines() or ["no error message"]
        raise RuntimeError(f"planning on {gpus} virtual devices failed: {lines[-1]}")
    return json.loads(stdout.splitlines()[-1])


def fit_run(workload: Workload, gpus: int, device_bytes: int, plan: dict[str, Any], plans: Callable) -> FitRow:
    """The workload's row from its ``plan`` at the whole batch per device; a train step that does not fit is
    planned again (``plans``, as ``plans_in_subprocess``) at the largest micro-batch (a divisor of the per-device
    batch) that the plan's temporaries, scaled linearly with the micro-batch, predict to fit, lowered further until
    XLA's plan fits (or one example per device does not). Downstream rows are planned at lm-eval's batch only."""
    row = FitRow.planned(workload, gpus, device_bytes, workload.batch_size // workload.devices(gpus), plan)
    while workload.trains and not row.fits and row.micro_batch > 1:
        fixed = row.total_bytes - row.temp_bytes
        predicted = max(1, int(row.micro_batch * (row.usable_bytes - fixed) / row.temp_bytes))
        micro_batch = max(d for d in range(1, row.micro_batch) if row.per_device_batch % d == 0 and d <= predicted)
        plan = plans([(workload, micro_batch)], row.gpus)[0]
        row = FitRow.planned(workload, gpus, device_bytes, micro_batch, plan)
        logger.info("%s: micro-batch %d plans %.1f GB per device", workload.run_id, micro_batch, row.total_bytes / 1e9)
    return row


def rows_file(out_csv: Path) -> Path:
    """Where the rows of the fit table ``out_csv`` are kept as they complete, until the table is written."""
    return Path(out_csv).with_name(f"{Path(out_csv).name}.rows.jsonl")


def kept_row_count(out_csv: Path) -> int:
    """The rows kept for ``out_csv`` (``rows_file``): a fit attempt's progress."""
    path = rows_file(out_csv)
    return len(path.read_text().splitlines()) - 1 if path.is_file() else 0


def kept_rows(path: Path, key: str) -> dict[tuple[str, int, int], FitRow]:
    """The rows in ``path`` by job, where its first line is ``key``'s (none of another); a line cut short by a kill
    ends them."""
    lines = path.read_text().splitlines() if path.is_file() else []
    rows: dict[tuple[str, int, int], FitRow] = {}
    for line in lines[1:] if lines[:1] == [json.dumps({"key": key})] else []:
        try:
            row = FitRow(**json.loads(line))
        except ValueError:
            break
        rows[row.job_key] = row
    return rows


def fit_rows(jobs: list[tuple[Workload, int, int]], kept: Path, key: str) -> list[FitRow]:
    """The rows of ``jobs`` (``(workload, GPUs, device bytes)``), in order: per
    device count, every first plan, at the whole batch per device, in one process, then each of its rows' micro-batch
    search. Each row is appended to ``kept`` as it completes, after the line of ``key`` (what the rows mean), and
    the jobs whose row ``kept`` holds for ``key`` are not planned again (``kept_rows``). A stop signal ends it
    between rows, and a planning process at once (its plans lost), with ``RunStopped``."""
    requests, devices = [], []
    for workload, gpus, _ in jobs:
        devices.append(workload.devices(gpus))
        if workload.batch_size % devices[-1]:
            raise ValueError(
                f"{workload.run_id}: batch_size {workload.batch_size} is not divisible by {devices[-1]} "
                f"GPUs; choose a GPU count that divides it."
            )
        requests.append((workload, workload.batch_size // devices[-1]))
    rows = kept_rows(kept, key)
    atomic_write_text(
        kept, "".join(json.dumps(line) + "\n" for line in [{"key": key}, *map(dataclasses.asdict, rows.values())])
    )
    job_keys = [(workload.run_id, devices[i], device_bytes) for i, (workload, _, device_bytes) in enumerate(jobs)]
    progress = Progress("fit", len(jobs), "rows", done=sum(job in rows for job in job_keys), every_s=0)
    with StopSignals() as stop, kept.open("a") as kept_file:

        def plans(requests: list[tuple[Workload, int]], count: int) -> list[dict[str, int]]:
            try:
                return plans_in_subprocess(requests, count, stop)
            finally:
                if stop.signal_name is not None:
                    raise RunStopped(
                        f"fit: stopped on request ({stop.signal_name}: SIGTERM to the job or SLURM's walltime "
                        f"warning) after {progress.done} of {progress.total} rows; they are kept in {kept}, rerun "
                        "the job to resume."
                    )

        for count in sorted(set(devices)):
            same = [i for i, job in enumerate(job_keys) if devices[i] == count and job not in rows]
            for i, plan in zip(same, plans([requests[i] for i in same], count) if same else [], strict=True):
                workload, gpus, device_bytes = jobs[i]
                row = rows[job_keys[i]] = fit_run(workload, gpus, device_bytes, plan, plans)
                kept_file.write(json.dumps(dataclasses.asdict(row)) + "\n")
                kept_file.flush()
                logger.info("%s: %s", workload.run_id, json.dumps(dataclasses.asdict(row)))
                progress.advance(note=workload.run_id)
    return [rows[job] for job in job_keys]


def planned_jobs(
    grid: Grid,
    device: str | None,
    gpus: int | None,
    site: Site | None,
    run_ids: list[str] | None = None,
    preflight_table: Path | None = None,
) -> list[tuple[Workload, int, int]]:
    """``(workload, GPUs, device bytes)`` of every workload of ``grid`` (or of ``run_ids``): on ``gpus`` GPUs of
    ``device``, or, given a ``site``, of the site's memory on each GPU count its job may get there
    (``pipeline.planning.jobs``): a pretraining run's and a fine-tune's as sized before the preflight and, where
    ``preflight_table`` exists, after its measured throughput resized it (both, so that the table has the row its job
    reads either way); a memory probe's one node's; a downstream job's one."""
    from pipeline.planning.jobs import JobSizing

    if site is None and device not in DEVICES:
        raise ValueError(f"--device {device!r}: unknown GPU; expected one of {sorted(DEVICES)}.")
    known = grid.workloads
    unknown = sorted(set(run_ids or []) - set(known))
    if unknown:
        raise ValueError(
            f"--runs {', '.join(unknown)}: not a pretraining run, memory probe, fine-tune or "
            f"downstream-<run> of preset {grid.config['preset']!r}; expected some of {', '.join(known)}."
        )
    chosen = [known[run_id] for run_id in run_ids or known]
    if site is None:
        return [(workload, gpus, DEVICES[device].memory_bytes) for workload in chosen]
    if site.gpus_per_node == 0:
        raise ValueError("--site: the site has no GPUs (gpus_per_node 0); there is no GPU memory to plan for.")
    sizing = JobSizing(grid, site, preflight_table=preflight_table)
    return [
        (workload, count, site.gpu_memory_bytes)
        for workload in chosen
        for count in dict.fromkeys(jobs.gpu_count(workload.run_id) for jobs in (sizing.before_preflight, sizing))
    ]


def plans_digest(grid: Grid, jobs: list[tuple[Workload, int, int]]) -> str:
    """A hash of every row the fit table of the preset's ``grid`` holds for the ``planned_jobs`` ``jobs`` (run,
    ``plan_key``, GPUs, memory and the share JAX may use): the ``fit`` rule's parameter, so that Snakemake plans again
    when the preset or the site changes what a row means (a preflight report that resizes a job included), and not
    when only learning rates or step counts change."""
    rows = []
    for workload, count, device_bytes in jobs:
        rows.append(
            (workload.run_id, workload.plan_key, count, device_bytes, int(device_bytes * gpu_memory_fraction()))
        )
    return json_digest(sorted(rows), length=16)


def write_fit(
    grid: Grid,
    device: str | None,
    gpus: int | None,
    run_ids: list[str] | None,
    out_md: Path,
    out_csv: Path,
    site: Site | None = None,
    preflight_table: Path | None = None,
) -> list[FitRow]:
    """Plan the jobs of ``planned_jobs`` and write the fit table. With ``run_ids``, the new rows replace the rows of
    the same jobs in an existing ``out_csv`` and the others are kept; without, the table holds the new rows only.
    The rows are kept as they complete beside ``out_csv`` (``rows_file``), for a rerun after a stop, under the
    ``plans_digest`` of the jobs planned. Returns the new rows."""
    jobs = planned_jobs(grid, device, gpus, site, run_ids, preflight_table)
    rows = fit_rows(jobs, rows_file(out_csv), plans_digest(grid, jobs))
    kept = []
    if run_ids and Path(out_csv).is_file():
        replaced = {row.job_key for row in rows}
        kept = [row for row in read_fit_rows(out_csv) if row.job_key not in replaced]
    markdown, table = fit_table(kept + rows)
    atomic_write_text(out_csv, table)
    atomic_write_text(out_md, markdown)
    rows_file(out_csv).unlink()
    return rows
