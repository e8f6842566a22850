"""Where a finished DAG's wall time goes (``bench dag``, docs/testing.md#benchmarks): per job kind (its log folder),
the jobs, their wall and CPU seconds (Snakemake's benchmark files) and the mean seconds of each phase (the markers
of ``pipeline.execution.phases``, a phase lasting to the next marker; ``outside``: wall time outside the marked
span); against a ``--baseline``, both DAGs' totals, their ratio and each phase's mean."""

import csv
import dataclasses
import io
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

from pipeline.artifacts import csv_text, markdown_table
from pipeline.execution.phases import MARKER

PHASES = (
    "interpreter",
    "ray",
    "task",
    "setup",
    "eval",
    "compile",
    "train",
    "checkpoint",
    "final-eval",
    "write",
    "shutdown",
    "exit",
)
"""Markers in the order a training job logs them: the interpreter starts (and imports the CLI); the driver starts
or joins Ray; the task starts in its worker (and imports JAX, Levanter, the models); the trainer, data and model
are set up; evaluations (the untrained model's, then periodic ones); the first training step with its compile;
the other steps; the final checkpoint; the final full-validation evaluation; the run folder's files; the task's
return and Ray's shutdown; the CLI's exit."""
OUTSIDE = "outside"
COLUMNS = ("kind", "jobs", "wall_s", "mean_wall_s", "mean_cpu_s", *PHASES, OUTSIDE)


@dataclasses.dataclass(frozen=True)
class JobTiming:
    """One job: its kind, its wall and CPU seconds (Snakemake's benchmark; None without one), seconds per phase."""

    kind: str
    wall_s: float | None
    cpu_s: float | None
    phases: dict[str, float]


def phase_seconds(log_text: str) -> dict[str, float]:
    """Seconds per phase from a log's markers (in time order: a worker's forwarded lines may arrive late; markers of
    the same millisecond in log order); the last marker ends the span and counts no time of its own."""
    marks = sorted(((float(m["time"]), m["name"]) for m in MARKER.finditer(log_text)), key=lambda mark: mark[0])
    seconds: dict[str, float] = defaultdict(float)
    for (start, name), (end, _) in pairwise(marks):
        seconds[name] += end - start
    return dict(seconds)


def benchmark_seconds(tsv: Path) -> tuple[float, float]:
    """Wall and CPU seconds (``s``, ``cpu_time``) of a Snakemake benchmark file; means over its rows (``repeat``)."""
    rows = list(csv.DictReader(io.StringIO(tsv.read_text()), delimiter="\t"))
    if not rows or not {"s", "cpu_time"} <= rows[0].keys():
        raise ValueError(
            f"{tsv} is not a Snakemake benchmark file (no 's' or 'cpu_time' column); delete it and rerun the job."
        )
    return tuple(sum(float(row[column]) for row in rows) / len(rows) for column in ("s", "cpu_time"))


def job_timings(workdir: Path, preset: str) -> list[JobTiming]:
    """Every job that left a log, with its benchmark wall time where Snakemake wrote one."""
    results = workdir / "results" / preset
    logs, benchmarks = results / "logs", results / "benchmarks"
    if not logs.is_dir():
        raise FileNotFoundError(
            f"{logs} does not exist; run the DAG (snakemake --directory {workdir}) "
            f"first or pass the workdir and --preset it used."
        )
    timings = []
    for log in sorted(logs.rglob("*.log")):
        relative = log.relative_to(logs).with_suffix("")
        tsv = benchmarks / relative.with_suffix(".tsv")
        wall_s, cpu_s = benchmark_seconds(tsv) if tsv.is_file() else (None, None)
        phases = phase_seconds(log.read_text(errors="replace"))
        timings.append(JobTiming(relative.parent.as_posix(), wall_s, cpu_s, phases))
    return timings


def kind_table(timings: list[JobTiming]) -> list[dict]:
    """Per job kind (and a ``total`` row): jobs, summed and mean wall seconds, mean seconds per phase per job."""
    by_kind: dict[str, list[JobTiming]] = defaultdict(list)
    for timing in timings:
        by_kind[timing.kind].append(timing)
    rows = [_row(kind, jobs) for kind, jobs in sorted(by_kind.items(), key=lambda item: -_wall(item[1]))]
    rows.append(_row("total", timings))
    return rows


def _wall(jobs: list[JobTiming]) -> float:
    return sum(job.wall_s or sum(job.phases.values(), 0.0) for job in jobs)


def _row(kind: str, jobs: list[JobTiming]) -> dict:
    outside = [job.wall_s - sum(job.phases.values()) for job in jobs if job.wall_s is not None]
    return {
        "kind": kind,
        "jobs": len(jobs),
        "wall_s": _wall(jobs),
        "mean_wall_s": _wall(jobs) / len(jobs),
        "mean_cpu_s": sum(job.cpu_s or 0.0 for job in jobs) / len(jobs),
        **{phase: sum(job.phases.get(phase, 0.0) for job in jobs) / len(jobs) for phase in PHASES},
        OUTSIDE: sum(outside) / len(jobs),
    }


def markdown(rows: list[dict], title: str) -> str:
    """The table as Markdown: seconds with one decimal, phases no job logged left out."""
    used = [c for c in COLUMNS if c not in PHASES or any(row[c] for row in rows)]
    about = "Per job kind: jobs, summed wall s, and per job the mean wall s, CPU s and s per phase"
    return _page(
        title, f"{about} (`python -m pipeline bench dag`).", used, [[_cell(row[c]) for c in used] for row in rows]
    )


def _page(title: str, about: str, header: list[str], cells: list[list[str]]) -> str:
    """A Markdown page: the ``title`` heading, the sentence ``about`` the table, then the table."""
    return f"# {title}\n\n{about}\n\n{markdown_table(header, cells)}\n"


def _cell(value) -> str:
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def comparison_markdown(baseline: list[dict], rows: list[dict], title: str) -> str:
    """Per job kind (``total`` last), the baseline's and this DAG's jobs and summed wall seconds, this/baseline, and
    each phase's mean seconds per job as ``baseline → this`` (phases neither DAG logged left out)."""
    before = {row["kind"]: row for row in baseline}
    after = {row["kind"]: row for row in rows}
    kinds = [row["kind"] for row in rows if row["kind"] != "total"]
    kinds += [kind for kind in before if kind not in after and kind != "total"] + ["total"]
    phases = [p for p in (*PHASES, OUTSIDE) if any(row[p] for row in (*baseline, *rows))]
    header = ["kind", "jobs", "baseline wall_s", "wall_s", "ratio", *phases]
    cells = []
    for kind in kinds:
        old, new = before.get(kind), after.get(kind)
        jobs = f"{old['jobs'] if old else 0} → {new['jobs'] if new else 0}"
        walls = [_cell(row["wall_s"]) if row else "—" for row in (old, new)]
        ratio = f"{new['wall_s'] / old['wall_s']:.3f}" if old and new and old["wall_s"] else "—"
        means = [f"{_cell(old[p]) if old else '—'} → {_cell(new[p]) if new else '—'}" for p in phases]
        cells.append([kind, jobs, *walls, ratio, *means])
    about = (
        "Per job kind: jobs (baseline → this), summed wall s of each DAG, their ratio, and per "
        "job the mean s of each phase, baseline → this (`python -m pipeline bench dag --baseline`)."
    )
    return _page(title, about, header, cells)


def write_tables(rows: list[dict], out_dir: Path, label: str, title: str) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    md, table = out_dir / f"dag-{label}.md", out_dir / f"dag-{label}.csv"
    md.write_text(markdown(rows, title))
    table.write_text(
        csv_text(({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()} for row in rows), COLUMNS)
    )
    return md, table
