"""Verbs of the preflight: ``preflight`` (its job list and GPU-hour bound, before submitting), ``preflight-job`` (one
shape, as a Ray task) and ``preflight-report``."""

import argparse
import json
import logging
import math
from pathlib import Path

from pipeline.commands import absolute, add_options, add_ray_options, add_verb, run_task
from pipeline.planning.preflight_jobs import DEFAULT_TIMED, DEFAULT_WARMUP


def _plan(args: argparse.Namespace) -> None:
    from pipeline.artifacts import text_table
    from pipeline.config import load_preset
    from pipeline.config.site import load_site, preset_results
    from pipeline.planning.cost import preview
    from pipeline.planning.grid import Grid
    from pipeline.planning.jobs import JobSizing
    from pipeline.planning.preflight_jobs import PREFLIGHT_RUNTIME_MIN, stage_jobs, training_shapes

    config = load_preset({"preset": args.preset})
    grid = Grid.load(config)
    site = None if args.site is None else load_site(args.site)
    fit_table = args.fit_table or preset_results(site, config["preset"]) / "fit.csv"
    sizing = JobSizing(grid, site, fit_table=fit_table if site else None)
    shapes, stages = training_shapes(sizing), stage_jobs(grid)
    jobs = [
        (shape.shape_id, shape.gpus, shape.micro_batch, shape.minutes, f"{len(shape.runs)} ({', '.join(shape.runs)})")
        for shape in shapes.values()
    ]
    for kind, job in stages.items():
        covers = f"{job.runs} (like {job.run_id}, on the checkpoint of {job.source_shape(shapes)})"
        jobs.append((kind, job.resources(sizing).gpus, "-", PREFLIGHT_RUNTIME_MIN, covers))
    hours = {name: max(gpus, 1) * minutes / 60 for name, gpus, _, minutes, _ in jobs}  # GPU-hours at most
    cells = [(name, gpus, micro, minutes, f"{hours[name]:.2f}", runs) for name, gpus, micro, minutes, runs in jobs]
    print(text_table(("shape", "GPUs", "micro", "min", "GPU-h", "runs"), cells, "lrrrrl", rule=True))
    bound = sum(hours.values())
    print(
        f"\n{len(shapes)} training shape job(s) for {sum(len(s.runs) for s in shapes.values())} pretraining "
        f"run(s) and {len(stages)} fine-tune, lm-eval and analysis job(s); at most {bound:.1f} GPU-hours (every "
        "job's GPUs x its walltime request)."
    )
    if site is not None:
        grid_hours = preview(grid, site.device, mfu=site.mfu)[0][-1]["gpu_hours"]  # the last stage's: the grid's
        share = bound / grid_hours if grid_hours > 0 else math.nan
        print(
            f"The grid: {grid_hours:,.1f} GPU-hours on {site.device}; the preflight is at most "
            f"{100 * share:.1f} % of it."
        )


def _job(args: argparse.Namespace) -> None:
    row = {"shape": args.shape, "kind": "pretrain", "run_id": json.loads(args.spec)["run_id"]}
    task_args = (*absolute(args.job_dir, args.cache, args.tokenizer), args.warmup, args.timed, args.micro_batch)
    task = "pipeline.preflight.job:preflight_pretrain"
    _measured_row(args, row, f"shape {args.shape}", task, args.spec, *task_args, args.planned_bytes, args.budget_bytes)


def _stage(args: argparse.Namespace) -> None:
    from pipeline.preflight.stages import StageFolders

    folders = StageFolders(*absolute(args.source_dir, args.job_dir, args.cache, args.tokenizer))
    row = {"shape": args.kind, "kind": args.kind, "run_id": args.run_id}
    task_args = (args.kind, json.loads(args.settings), folders, args.micro_batch)
    lm_eval = args.kind == "downstream"  # its work imports torch
    _measured_row(args, row, args.kind, "pipeline.preflight.stages:measured_stage", *task_args, uses_torch=lm_eval)


def _measured_row(args: argparse.Namespace, row: dict, what: str, task: str, *task_args, uses_torch=False) -> None:
    """Measure a preflight job in the Ray task ``task`` of ``task_args`` (a fresh worker) and write its ``row``, with
    the job's ``runs`` and device label, to ``args.row``: with what the task returns and status ok; status stopped and
    "stopped by walltime at step k of n" where the job's walltime warning stopped it (no fault of the shape); else
    status failed and the failure's one sentence: a failed job is a measurement too, its verb succeeds and leaves its
    row, so the report can say what failed."""
    from pipeline.artifacts import atomic_write_json
    from pipeline.execution.errors import STOPPED_AT, failure_sentence

    row |= {"runs": args.runs, "device_label": args.device_label}
    try:
        measured = run_task(args, task, *task_args, uses_torch=uses_torch, fresh_process=True)
        row.update(status="ok", error="", **measured)
    except Exception as error:  # noqa: BLE001  (the row records the failure's one sentence)
        sentence, _ = failure_sentence(error, f"the preflight of {what}")
        logging.exception("preflight of %s failed", what)
        if stop := STOPPED_AT.search(sentence):
            row.update(
                status="stopped",
                error=f"stopped by walltime at step {stop[2]} of {stop[3]} ({stop[1]}): "
                "the job's walltime ended before its updates, save and restore did",
            )
        else:
            row.update(status="failed", error=sentence.removeprefix("error: "))
    atomic_write_json(args.row, row)
    logging.info("preflight %s: %s", what, json.dumps(row))


def _report(args: argparse.Namespace) -> None:
    from pipeline.artifacts import atomic_write_text, csv_text
    from pipeline.config import load_preset
    from pipeline.planning.cost import cost_rows
    from pipeline.planning.grid import Grid
    from pipeline.planning.measured import DEVICES, MeasuredTable
    from pipeline.preflight import report

    config = load_preset({"preset": args.preset, **json.loads(args.overrides)})
    rows = report.with_verdicts([json.loads(Path(path).read_text()) for path in args.rows])
    grid = Grid.load(config)
    workloads = list(grid.pretraining.values())
    if args.device_label in DEVICES:
        costs = cost_rows(workloads, MeasuredTable(grid, args.device_label, mfu=args.mfu))
    else:
        costs = [{"run_id": w.run_id, "tokens": w.tokens, "gpu_hours": math.nan} for w in workloads]
    projection = report.projection_rows(costs, json.loads(args.shapes), rows, args.safety_factor)
    atomic_write_text(args.csv, csv_text(rows, report.COLUMNS))
    atomic_write_text(args.md, report.markdown(rows, projection))
    atomic_write_text(args.html, report.html_page(rows, projection))
    atomic_write_text(args.projection, csv_text(projection, report.PROJECTION_COLUMNS))
    print(report.markdown(rows, projection))


def _measured_job_options(parser: argparse.ArgumentParser, cache: str | None, **micro_batch) -> None:
    """The options of a preflight job measured as a Ray task (``preflight-job``, ``preflight-stage``); ``cache``: the
    help of ``--cache`` (None: the run's), ``micro_batch``: ``--micro-batch``'s default or required, and help."""
    parser.add_argument("--job-dir", type=Path, required=True)
    parser.add_argument("--runs", type=int, required=True, help="jobs of the grid this one stands for")
    add_options(parser, "--cache", "--tokenizer", cache=cache)
    parser.add_argument("--micro-batch", type=int, **micro_batch)
    parser.add_argument("--device-label", required=True, help="the cost model's device (site.device, or cpu)")
    parser.add_argument("--row", type=Path, required=True, help="the measurement row (JSON)")
    add_ray_options(parser, gpus=True)


def register(verbs: argparse._SubParsersAction) -> None:
    plan = add_verb(
        verbs,
        "preflight",
        _plan,
        "the preflight's jobs (one per training job shape) and their GPU-hour bound, before submitting",
    )
    add_options(
        plan,
        "--preset",
        "--site",
        site="SLURM site settings: each shape's GPUs and micro-batch as the site and the fit table size its runs",
    )
    plan.add_argument(
        "--fit-table",
        type=Path,
        help="the site's fit table (default: <results>/<preset>/fit.csv, as `fit --site` writes it)",
    )

    job = add_verb(
        verbs,
        "preflight-job",
        _job,
        "one shape's bounded training job, restarted from its checkpoint and measured, as a Ray task",
    )
    job.add_argument("--spec", required=True, help="the resolved RunSpec of the shape's first run, as JSON")
    job.add_argument("--shape", required=True)
    job.add_argument("--warmup", type=int, default=DEFAULT_WARMUP, help="untimed updates (compilation)")
    job.add_argument("--timed", type=int, default=DEFAULT_TIMED, help="timed updates")
    job.add_argument("--planned-bytes", type=int, help="the fit row's planned bytes per device")
    job.add_argument("--budget-bytes", type=int, help="the fit row's usable bytes per device")
    _measured_job_options(job, None, required=True, help="0: the whole per-device batch at once")

    stage = add_verb(
        verbs,
        "preflight-stage",
        _stage,
        "one bounded fine-tune, lm-eval or analysis job on a preflight pretraining's checkpoint, measured, as a Ray "
        "task",
    )
    stage.add_argument(
        "--kind", required=True, help="finetune-lora, finetune-full, downstream, spectra, lyapunov, frontier"
    )
    stage.add_argument("--run-id", required=True, help="the first job of the grid this one stands for")
    stage.add_argument("--source-dir", type=Path, required=True, help="<preflight>/<source shape>/train")
    _measured_job_options(
        stage, "the token cache (fine-tune: its target's)", default=0, help="fine-tune: 0, the whole per-device batch"
    )
    stage.add_argument(
        "--settings",
        required=True,
        help="the fine-tune's spec, or the preset's downstream or analysis.<kind> section (+ pair, prefetched), as "
        "JSON",
    )

    report = add_verb(
        verbs, "preflight-report", _report, "the preflight's rows as md/csv/html, projected onto the grid"
    )
    report.add_argument("--preset", required=True)
    add_options(report, "--overrides")
    report.add_argument("--rows", nargs="+", required=True, help="the jobs' measurement rows (JSON)")
    report.add_argument("--shapes", required=True, help='{shape: {"runs": [...], "gpus": n}} as JSON')
    report.add_argument("--device-label", required=True)
    add_options(report, "--mfu", mfu="the estimate's MFU (site.mfu)")
    report.add_argument("--safety-factor", type=float, default=1.0, help="walltime = GPU-hours x this / GPUs")
    for name in ("md", "csv", "html", "projection"):
        report.add_argument(f"--{name}", type=Path, required=True)
