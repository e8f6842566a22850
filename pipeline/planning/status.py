"""Where a grid stands, from its results folder alone (docs/cluster.md#running-for-days), and its jobs' plan at a site.

A training run is ``done`` (its ``summary.json``, written last), ``failed`` (its log ends in the one sentence of
``pipeline.execution.errors``), ``stopped`` (its log ends in "stopped by walltime at step k of n"), ``running`` (a log
ending in neither, or updates without a log; chunk k of n by updates) or ``missing``. GPU-hours spent: a done run's
benchmark seconds (else ``provenance.json``'s wall time) × its devices, a running run's update times × its planned GPUs
(a lower bound); left: the preview's GPU-hours × the share of updates not done."""

import csv
import dataclasses
import json
from pathlib import Path
from typing import Any

from pipeline.artifacts import read_metrics, text_table
from pipeline.data.shards import shards_done
from pipeline.execution.errors import STOPPED_AT
from pipeline.execution.progress import duration
from pipeline.planning.fit import kept_row_count, planned_jobs, rows_file
from pipeline.planning.jobs import CPU_JOBS, JobSizing
from pipeline.planning.placement import CHAIN_MARGIN_RETRIES, JobRequest, WalltimeError
from pipeline.train.attempts import data_attempt_file
from pipeline.train.checkpoints import complete_checkpoints

RECENT_UPDATES = 50
"""Updates whose mean time gives a running run's ETA."""
RUN_STATES = ("done", "running", "stopped", "failed", "missing")
"""A run's states (module docstring), in the order the status counts them."""


@dataclasses.dataclass(frozen=True)
class RunState:
    """One run's state, one of ``RUN_STATES`` (module docstring)."""

    run_id: str
    state: str
    detail: str
    gpu_hours: float
    done_fraction: float


def trained_updates(run_dir: Path) -> tuple[int, list[float]]:
    """Updates done by a run (its newest logged update + 1, 0 without one) and each logged update's seconds."""
    path = run_dir / "metrics.jsonl"
    records = [record for record in read_metrics(path) if "loss" in record] if path.is_file() else []
    return (records[-1]["step"] + 1 if records else 0), [record["step_s"] for record in records if "step_s" in record]


def newest_checkpoint(run_dir: Path) -> str:
    complete = complete_checkpoints(run_dir / "checkpoints")
    return complete[-1].name if complete else "none"


def run_state(results: Path, kind: str, run_id: str, steps: int, gpus: int, chunks: int) -> RunState:
    """The state of a run of ``kind`` (pretrain, finetune) of ``steps`` updates on ``gpus`` GPUs in ``chunks`` jobs."""
    run_dir, log = results / "runs" / run_id, results / "logs" / kind / f"{run_id}.log"
    if (run_dir / "summary.json").is_file():
        record = run_dir / "provenance.json"
        provenance = json.loads(record.read_text()) if record.is_file() else {}
        used = len(provenance.get("devices") or []) or gpus
        benchmark = results / "benchmarks" / kind / f"{run_id}.tsv"  # Snakemake's; its last row's seconds
        rows = list(csv.DictReader(benchmark.read_text().splitlines(), delimiter="\t")) if benchmark.is_file() else []
        seconds = (float(rows[-1]["s"]) if rows else 0) or provenance.get("wall_s", 0)
        return RunState(run_id, "done", f"{steps} updates", seconds * used / 3600, 1.0)
    updates, step_seconds = trained_updates(run_dir)
    spent = sum(step_seconds) * gpus / 3600
    lines = log.read_text(errors="replace").splitlines() if log.is_file() else []
    ending = next((line.strip() for line in reversed(lines) if line.strip()), "")  # its last non-empty line
    if stop := STOPPED_AT.search(ending):
        resumed = f"checkpoint {newest_checkpoint(run_dir)}, the next chunk resumes it"
        detail = f"stopped by walltime at step {stop[2]} of {stop[3]} ({stop[1]}); {resumed}"
        return RunState(run_id, "stopped", detail, spent, int(stop[2]) / steps)
    if ending.startswith("error:"):
        return RunState(run_id, "failed", ending, spent, updates / steps)
    if not log.is_file() and not updates:
        return RunState(run_id, "missing", "not started", 0.0, 0.0)
    chunk = min(chunks, updates * chunks // steps + 1)
    recent = step_seconds[-RECENT_UPDATES:]
    eta = f", ETA {duration(sum(recent) / len(recent) * (steps - updates))}" if recent else ""
    detail = f"step {updates} of {steps}, chunk {chunk} of {chunks}, checkpoint {newest_checkpoint(run_dir)}{eta}"
    return RunState(run_id, "running", detail, spent, updates / steps)


def grid_status(
    results: Path, sizing: JobSizing, preview_hours: dict[str, float]
) -> tuple[list[RunState], dict[str, float]]:
    """Each training job's state, on the GPUs and in the chunks ``sizing`` plans (1 GPU without a site with GPUs),
    and the GPU-hours spent and left of the preview's ``preview_hours`` (by job id)."""
    states, site = [], sizing.site
    for run_id, job in sizing.grid.training.items():
        gpus = sizing.need(job).gpus if site is not None and site.gpus_per_node else 1
        states.append(run_state(results, job.kind, run_id, job.train.steps, gpus, sizing.training_chunks(run_id)))
    return states, {
        "spent": sum(state.gpu_hours for state in states),
        "preview": sum(preview_hours[state.run_id] for state in states),
        "left": sum(preview_hours[state.run_id] * (1 - state.done_fraction) for state in states),
    }


def format_status(states: list[RunState], hours: dict[str, float]) -> str:
    """A table of run, state and detail, the count per state, and the GPU-hours line."""
    table = text_table(("run", "state", "detail"), [(state.run_id, state.state, state.detail) for state in states])
    counts = [f"{sum(state.state == name for state in states)} {name}" for name in RUN_STATES]
    spent = (
        f"GPU-hours: {hours['spent']:,.1f} spent (a lower bound), {hours['left']:,.1f} left of the "
        f"preview's {hours['preview']:,.1f}"
    )
    return "\n".join([table, f"{', '.join(counts)} of {len(states)} runs", spent])


def attempt_outcome(out: Path) -> str:
    """How the last attempt of the data job or fit writing ``out`` ended (``running`` without a record), a failed
    one's with its sentence."""
    record = data_attempt_file(out)
    outcome = json.loads(record.read_text()) if record.is_file() else {"outcome": "running"}
    return f"{outcome['outcome']}: {outcome['sentence']}" if outcome["outcome"] == "failed" else outcome["outcome"]


def fit_lines(results: Path, sizing: JobSizing) -> list[str]:
    """The fit table's line while its rows are kept (``pipeline.planning.fit.rows_file``): rows kept of the rows it
    plans (the site's jobs as ``planned_jobs`` sizes them; without a site with GPUs, one per workload) and its last
    attempt's outcome."""
    table, site = results / "fit.csv", sizing.site
    if not rows_file(table).is_file():
        return []
    planned = sizing.grid.workloads
    if site and site.gpus_per_node:
        planned = planned_jobs(sizing.grid, None, None, site, preflight_table=results / "preflight.csv")
    return [f"fit {table.name}: {kept_row_count(table)} of {len(planned)} rows, {attempt_outcome(table)}"]


def data_job_lines(results: Path) -> list[str]:
    """One line per data job with a staging folder (``data/*/.<name>.partial``): its shards done of its total (a token
    cache's: its corpus's) and its last attempt's outcome."""
    lines = []
    for staging in sorted((results / "data").glob("*/.*.partial")):
        out = staging.with_name(staging.name[1:].removesuffix(".partial"))
        done, total = shards_done(out)
        if total is None:
            manifest = results / "data" / "corpora" / out.name.partition("-")[0] / "manifest.json"
            splits = json.loads(manifest.read_text()).values() if manifest.is_file() else []
            total = sum(len(split["files"]) for split in splits if isinstance(split, dict) and "files" in split)
        lines.append(f"data {staging.parent.name}/{out.name}: {done} of {total} shards, {attempt_outcome(out)}")
    return lines


def rule_attempts(retries: int | None) -> int:
    """A rule's attempts: its ``retries`` + 1, the SLURM profile's 2 retries where None."""
    return (CHAIN_MARGIN_RETRIES if retries is None else retries) + 1


PLAN_COLUMNS = ("job", "gpus", "micro_batch", "needed_min", "granted_min", "chunks", "attempts", "partition")
"""The plan table's columns (``plan_rows``)."""


def plan_rows(sizing: JobSizing) -> list[dict[str, Any]]:
    """One row per training job of ``sizing``'s grid at its site and one per data job (a corpus export's and a token
    cache's per dataset); each job's attempts: its rule's retries + 1, the SLURM profile's 2 retries where no job of
    the rule needs a chain; a job the site refuses (``WalltimeError``), its rule and sentence under ``refused``."""

    def row(job: str, request: JobRequest, attempts: int) -> dict[str, Any]:
        values = (job, request.gpus, request.micro_batch, request.needed_minutes, request.minutes, request.chunks)
        return dict(zip(PLAN_COLUMNS, (*values, attempts, request.placement.partition), strict=True))

    rows = []
    for jobs in (sizing.grid.pretraining, sizing.grid.finetunes):
        attempts = rule_attempts(sizing.chain_retries(jobs))
        rows += [row(f"{job.kind} {job_id}", sizing.training(job_id), attempts) for job_id, job in jobs.items()]
    for rule in CPU_JOBS:
        try:
            jobs, attempts = sizing.data_jobs(rule), rule_attempts(sizing.data_retries(rule))
        except WalltimeError as error:
            rows.append({"job": rule, "refused": str(error)})
            continue
        rows += [row(rule if name == rule else f"{rule} {name}", job, attempts) for name, job in jobs.items()]
    return rows


def format_plan(rows: list[dict[str, Any]]) -> str:
    """The plan table (``PLAN_COLUMNS``), then the sentence of each job the site refuses."""
    planned = [[row[key] for key in PLAN_COLUMNS] for row in rows if "refused" not in row]
    refused = [f"refused: {row['refused']}" for row in rows if "refused" in row]
    return "\n".join([text_table(PLAN_COLUMNS, planned), *refused])
