"""Verbs of the bench stage: ``cost`` (GPU-hours of a preset), ``fit`` (per-device memory of every run's train step,
fine-tune and lm-eval forward pass, planned on CPU by XLA) and ``bench <benchmark>``: the measured tables the previews
read and the benchmarks of the pipeline itself, each written to ``results/benchmarks/``."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path

from pipeline.bench import dag
from pipeline.bench.cost import BENCHMARKS_DIR, DEFAULT_MFU
from pipeline.bench.throughput import IDLE_LOAD, BenchConfig
from pipeline.config import REPO_ROOT, load_preset


def _cost(args: argparse.Namespace) -> None:
    from pipeline.artifacts import atomic_write_text
    from pipeline.bench.cost import (
        default_throughput_path,
        format_passes_table,
        format_stage_table,
        preflight_table,
        preview,
        run_csv,
    )

    stages, runs = preview(args.preset, args.device, args.throughput, args.mfu, args.preflight)
    measured = any(row["source"] == "measured" for row in runs)
    estimated = any(row["source"] == "estimate" for row in runs)
    print(f"Cost preview of preset {args.preset!r} on {args.device} (GPU-hours; wall-clock = GPU-hours / GPUs)")
    if measured:
        print(f"measured: training tokens/s per GPU from {args.throughput or default_throughput_path(args.device)}")
    if any(row["source"] == "preflight" for row in runs):
        table = args.preflight or preflight_table(load_preset({"preset": args.preset}))
        print(f"measured by the preflight: training tokens/s per GPU from {table}")
    if estimated:
        print(f"estimate, not measured: Levanter FLOPs/token x 3 at MFU {args.mfu} of the {args.device} dense peak")
    print(format_stage_table(stages))
    print("Not counted: periodic validation during training. LoRA costed as full fine-tuning; lm-eval requests "
          "as full context windows (upper bounds). Checkpoint disk: what finished runs keep (12 bytes/parameter "
          "each); a training run holds one more meanwhile.")
    print("\nPasses over the training data (built cache's token count, else the corpus's published size):")
    print(format_passes_table(runs))
    if args.csv:
        atomic_write_text(args.csv, run_csv(runs))
        print(f"per-run costs: {args.csv}")


def _fit(args: argparse.Namespace) -> None:
    from pipeline.bench.fit import write_fit
    from pipeline.site import load_site

    if args.site is not None and (args.device is not None or args.gpus is not None):
        raise ValueError("--site gives each job's GPUs and the GPU's memory; drop --device and --gpus.")
    config = load_preset({"preset": args.preset})
    site = None if args.site is None else load_site(args.site)
    out_dir = REPO_ROOT / "results" / config["preset"]
    runs = args.runs.split(",") if args.runs else None
    md, table = args.md or out_dir / "fit.md", args.csv or out_dir / "fit.csv"
    rows = write_fit(config, args.device or "h100", args.gpus or 8, runs, md, table, site)
    logging.info("fit finished: %d workloads, %d fit at the paper batch, %d with gradient accumulation, %d do not fit",
                 len(rows), sum(r["fits_at_paper_batch"] for r in rows),
                 sum(r["fits"] and not r["fits_at_paper_batch"] for r in rows), sum(not r["fits"] for r in rows))


def _throughput_sizes(args: argparse.Namespace) -> None:
    from pipeline.bench.throughput_sizes import measure

    out = measure(args.preset, args.device, args.micro_batch, args.repeats, args.warmup, args.families, args.sizes,
                  args.out)
    print(out.read_text(), end="")


def _throughput(args: argparse.Namespace) -> None:
    from pipeline.bench.throughput import markdown, run_benchmark, wait_for_idle, write_report

    settings = {field.name: getattr(args, field.name) for field in dataclasses.fields(BenchConfig)}
    waited = wait_for_idle(IDLE_LOAD, 60 * args.wait_idle_minutes) if args.wait_idle_minutes > 0 else 0.0
    result = run_benchmark(BenchConfig(**settings))
    result["waited_for_idle_s"] = waited
    write_report(result, args.out, args.out.with_suffix(".md"))
    print(markdown(result))
    if result["contended"]:
        print("WARNING: the host was busy during the run; the timings are not reliable.", file=sys.stderr)


def _jacobian(args: argparse.Namespace) -> None:
    from pipeline.bench.jacobian import run_benchmark, summary_markdown, write_report

    result = run_benchmark(args.tokens, args.hidden_dim, args.num_heads, args.repeats)
    write_report(result, args.out, args.out.with_suffix(".md"))
    print(summary_markdown(result))


def register(verbs: argparse._SubParsersAction) -> None:
    cost = verbs.add_parser("cost", help="GPU-hours per stage of a preset, from measured or estimated throughput")
    cost.add_argument("--preset", default="paper", help="preset name or YAML path (default: paper)")
    cost.add_argument("--device", default="h100", help="GPU the throughput refers to (default: h100)")
    cost.add_argument("--throughput", type=Path, default=None,
                      help="measured table (default: results/benchmarks/throughput-sizes-<device>.csv if present)")
    cost.add_argument("--mfu", type=float, default=DEFAULT_MFU, help="model FLOPs utilisation of the estimate")
    cost.add_argument("--preflight", type=Path, default=None,
                      help="the preset's preflight report, whose measured throughput wins over the table and the "
                           "estimate (default: results/<preset>/preflight.csv if present)")
    cost.add_argument("--csv", type=Path, default=None, help="write the per-run costs to this CSV")
    cost.set_defaults(run=_cost)

    fit = verbs.add_parser("fit", help="per-device memory of every run, fine-tune and lm-eval pass on a GPU, "
                                       "planned on CPU by XLA")
    fit.add_argument("--preset", default="paper", help="preset name or YAML path (default: paper)")
    fit.add_argument("--device", default=None, help="GPU whose memory the plan is checked against (default: h100)")
    fit.add_argument("--gpus", type=int, default=None,
                     help="GPUs of every training job, the FSDP mesh size (default: 8)")
    fit.add_argument("--site", default=None,
                     help="SLURM site settings (e.g. profiles/slurm/site.yaml): each job planned on the GPUs the "
                          "site gives it (pipeline/site.py), of the site's memory; training jobs read their "
                          "micro-batch from the table")
    fit.add_argument("--runs", default=None,
                     help="comma-separated ids to plan: runs, probes, fine-tunes, downstream-<run> (default: all)")
    fit.add_argument("--md", type=Path, default=None, help="markdown table (default: results/<preset>/fit.md)")
    fit.add_argument("--csv", type=Path, default=None, help="CSV table (default: results/<preset>/fit.csv)")
    fit.set_defaults(run=_fit)

    bench = verbs.add_parser("bench", help="measured tables and benchmarks (throughput-sizes, throughput, jacobian, "
                                           "dag), written to results/benchmarks/")
    benchmarks = bench.add_subparsers(dest="benchmark", required=True)

    sizes = benchmarks.add_parser("throughput-sizes", help="training tokens/s per GPU of every model a preset "
                                                           "trains: the table `cost` reads (on a GPU node)")
    sizes.add_argument("--preset", default="paper", help="preset name or YAML path (default: paper)")
    sizes.add_argument("--device", default=None, help="device label of the table (default: from JAX, e.g. h100)")
    sizes.add_argument("--micro-batch", type=int, default=8, help="sequences per timed step (default 8)")
    sizes.add_argument("--repeats", type=int, default=5, help="timed steps per model (default 5)")
    sizes.add_argument("--warmup", type=int, default=2, help="untimed (compiling) steps per model (default 2)")
    sizes.add_argument("--families", nargs="+", default=None, help="only these families")
    sizes.add_argument("--sizes", nargs="+", default=None, help="only these sizes")
    sizes.add_argument("--out", type=Path, default=None,
                       help="table to write (default: results/benchmarks/throughput-sizes-<device>.csv)")
    sizes.set_defaults(run=_throughput_sizes)

    throughput = benchmarks.add_parser("throughput", help="train step and inference of GPT vs DiffEqFormer at one "
                                                          "matched shape, side by side (App. D.1)")
    for field in dataclasses.fields(BenchConfig):
        throughput.add_argument(f"--{field.name.replace('_', '-')}", type=field.type, default=field.default,
                                help=f"default: {field.default}")
    throughput.add_argument("--out", type=Path, default=BENCHMARKS_DIR / "throughput-cpu.json",
                            help="JSON report, Markdown summary beside it (default: results/benchmarks/"
                                 "throughput-cpu.json)")
    throughput.add_argument("--wait-idle-minutes", type=float, default=0.0,
                            help=f"first wait up to this long for the 1-min load average to drop below {IDLE_LOAD}")
    throughput.set_defaults(run=_throughput)

    jacobian = benchmarks.add_parser("jacobian", help="the Lyapunov analysis' single-query Jacobian vs the full "
                                                      "sequence (App. B)")
    jacobian.add_argument("--tokens", type=int, default=256, help="sequence length N (default: 256)")
    jacobian.add_argument("--hidden-dim", type=int, default=256, help="default: 256")
    jacobian.add_argument("--num-heads", type=int, default=4, help="default: 4")
    jacobian.add_argument("--repeats", type=int, default=5, help="timed calls of each (default: 5)")
    jacobian.add_argument("--out", type=Path, default=BENCHMARKS_DIR / "lyapunov-jacobian-cpu.json",
                          help="JSON report, Markdown summary beside it (default: results/benchmarks/"
                               "lyapunov-jacobian-cpu.json)")
    jacobian.set_defaults(run=_jacobian)

    dag.register(benchmarks)
