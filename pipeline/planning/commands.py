"""Verbs of planning: ``cost`` (GPU-hours of a preset), ``fit`` (per-device memory of every run's train step,
fine-tune and lm-eval forward pass, planned on CPU by XLA) and ``status`` (where a grid stands, or its plan)."""

import argparse
import json
import logging
from pathlib import Path

from pipeline.commands import add_options, add_verb
from pipeline.config import load_preset


def _cost(args: argparse.Namespace) -> None:
    from pipeline.artifacts import atomic_write_text, csv_text
    from pipeline.planning.cost import format_passes_table, format_stage_table, preflight_path, preview
    from pipeline.planning.grid import Grid
    from pipeline.planning.measured import default_throughput_path

    grid = Grid.load(load_preset({"preset": args.preset}))
    stages, runs = preview(grid, args.device, args.throughput, args.mfu, args.preflight)
    sources = {row["source"] for row in runs}
    print(f"Cost preview of preset {args.preset!r} on {args.device} (GPU-hours; wall-clock = GPU-hours / GPUs)")
    if "measured" in sources:
        print(f"measured: training tokens/s per GPU from {args.throughput or default_throughput_path(args.device)}")
    if "preflight" in sources:
        table = args.preflight or preflight_path(grid.config["preset"])
        print(
            f"measured by the preflight: training tokens/s per GPU from {table} (a fine-tune: the MFU measured for "
            "its method, at its own FLOPs per token)"
        )
    if "estimate" in sources:
        print(f"estimate, not measured: Levanter FLOPs/token x 3 at MFU {args.mfu} of the {args.device} dense peak")
    print(format_stage_table(stages))
    print(
        "Not counted: periodic validation during training. LoRA, where estimated, costed as full fine-tuning; "
        "lm-eval requests as full context windows (upper bounds). Checkpoint disk: what finished runs keep (12 "
        "bytes/parameter each); a run holds two more while it trains (its two newest complete checkpoints, so that "
        "one bad save leaves one to resume from, and the one being written), per running run: up to "
        f"{max(row['running_checkpoint_bytes'] for row in runs) / 1e9:,.1f} GB for the largest."
    )
    print("\nPasses over the training data (built cache's token count, else the corpus's published size):")
    print(format_passes_table(runs))
    if args.csv:
        atomic_write_text(args.csv, csv_text(runs, list(runs[0])))
        print(f"per-run costs: {args.csv}")


def _status(args: argparse.Namespace) -> None:
    from pipeline.config.site import load_site, preset_results
    from pipeline.data.rates import SITE_RATES
    from pipeline.planning.cost import cost_rows
    from pipeline.planning.grid import Grid
    from pipeline.planning.jobs import JobSizing
    from pipeline.planning.measured import MeasuredTable
    from pipeline.planning.status import data_job_lines, fit_lines, format_plan, format_status, grid_status, plan_rows

    config = load_preset({"preset": args.preset, **json.loads(args.overrides)})
    grid = Grid.load(config)
    site = None if args.site is None else load_site(args.site)
    results = args.results or preset_results(site, config["preset"])
    fit_table = results / "fit.csv"
    sizing = JobSizing(grid, site, fit_table if fit_table.is_file() else None, data_rates=results / SITE_RATES)
    if args.plan:
        if site is None:
            raise ValueError("`status --plan` sizes the jobs at a site; give --site <site file>.")
        print(f"Plan of preset {config['preset']!r} at {args.site} (minutes; attempts: Snakemake's retries + 1)")
        print(format_plan(plan_rows(sizing)))
        return
    device = site.device if site is not None else args.device
    rows = cost_rows(list(grid.training.values()), MeasuredTable(grid, device, mfu=args.mfu), results)
    preview_hours = {job_id: row["gpu_hours"] for job_id, row in zip(grid.training, rows, strict=True)}
    states, hours = grid_status(results, sizing, preview_hours)
    print(f"Status of {results} (preview on {device})")
    print(format_status(states, hours), *data_job_lines(results), *fit_lines(results, sizing), sep="\n")


def _fit(args: argparse.Namespace) -> None:
    from pipeline.config.site import load_site, preset_results
    from pipeline.execution.errors import subject
    from pipeline.planning.fit import kept_row_count, write_fit
    from pipeline.planning.grid import Grid
    from pipeline.train.attempts import attempt_record, data_attempt_file

    if args.site is not None and (args.device is not None or args.gpus is not None):
        raise ValueError("--site gives each job's GPUs and the GPU's memory; drop --device and --gpus.")
    config = load_preset({"preset": args.preset, **json.loads(args.overrides)})
    site = None if args.site is None else load_site(args.site)
    device, gpus = args.device or "h100", args.gpus or 8
    results = preset_results(site, config["preset"])
    # Only a site's plan is the table its SLURM jobs read; a plan for a named device goes beside it.
    name = "fit" if site is not None else f"fit-{device}x{gpus}"
    md = args.md or results / f"{name}.md"
    table = args.csv or results / f"{name}.csv"
    preflight = (args.preflight or results / "preflight.csv") if site is not None else None
    runs = args.runs.split(",") if args.runs else None
    what = subject("fit", args)  # a retry runs only after a walltime stop or a preemption (the rows kept: progress)
    with attempt_record(data_attempt_file(table), args.attempt, what, lambda: kept_row_count(table), "row after {}"):
        rows = write_fit(Grid.load(config), device, gpus, runs, md, table, site, preflight)
    logging.info(
        "fit finished: %d workloads, %d fit at the paper batch, %d with gradient accumulation, %d do not fit",
        len(rows),
        sum(r.fits_at_paper_batch for r in rows),
        sum(r.fits and not r.fits_at_paper_batch for r in rows),
        sum(not r.fits for r in rows),
    )


def register(verbs: argparse._SubParsersAction) -> None:
    cost = add_verb(verbs, "cost", _cost, "GPU-hours per stage of a preset, from measured or estimated throughput")
    add_options(cost, "--preset", "--mfu", "--preflight")
    cost.add_argument("--device", default="h100", help="GPU the throughput refers to (default: h100)")
    cost.add_argument(
        "--throughput",
        type=Path,
        help="measured table (default: results/benchmarks/throughput-sizes-<device>.csv if present)",
    )
    cost.add_argument("--csv", type=Path, help="write the per-run costs to this CSV")

    fit = add_verb(
        verbs, "fit", _fit, "per-device memory of every run, fine-tune and lm-eval pass on a GPU, planned on CPU by XLA"
    )
    add_options(
        fit,
        "--preset",
        "--overrides",
        "--site",
        "--preflight",
        site="SLURM site settings (e.g. profiles/slurm/site.yaml): each job planned on the GPUs the site gives it "
        "(pipeline/planning/jobs.py), of the site's memory; training jobs read their micro-batch from the table",
        preflight="with --site: the preflight report whose measured throughput resizes jobs; their rows are planned "
        "at both GPU counts (default: <results>/<preset>/preflight.csv, where it exists)",
    )
    fit.add_argument("--device", help="GPU whose memory the plan is checked against (default: h100)")
    fit.add_argument(
        "--runs", help="comma-separated ids to plan: runs, probes, fine-tunes, downstream-<run> (default: all)"
    )
    fit.add_argument("--gpus", type=int, help="GPUs of every training job, the FSDP mesh size (default: 8)")
    fit.add_argument(
        "--md",
        type=Path,
        help="markdown table (default: <results>/<preset>/fit.md with --site, the table the SLURM jobs "
        "read; else results/<preset>/fit-<device>x<gpus>.md)",
    )
    fit.add_argument("--csv", type=Path, help="CSV table (default: as --md, .csv)")
    fit.add_argument("--attempt", type=int, default=1, help="Snakemake's attempt (pipeline.train.attempts)")

    status = add_verb(
        verbs,
        "status",
        _status,
        "each training run's state (done, running, stopped, failed, missing) and GPU-hours spent and left; --plan: "
        "each job's plan at a site",
    )
    add_options(
        status,
        "--preset",
        "--overrides",
        "--site",
        "--mfu",
        site="SLURM site settings: its results_dir, each run's GPUs and chunks, the preview's device",
    )
    status.add_argument(
        "--results", type=Path, help="the grid's results/<preset> folder, e.g. a copy (default: the site's or results/)"
    )
    status.add_argument("--device", default="h100", help="device of the preview without --site (default: h100)")
    status.add_argument(
        "--plan",
        action="store_true",
        help="print the plan instead: per job GPUs, micro-batch, needed and granted minutes, chunks, "
        "attempts, partition",
    )
