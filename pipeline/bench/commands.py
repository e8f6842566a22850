"""Verbs of the bench stage: ``bench <benchmark>``: the measured tables the planning previews read and the
benchmarks of the pipeline itself, each written to ``results/benchmarks/``."""

import argparse
import dataclasses
import sys
from pathlib import Path

from pipeline.artifacts import atomic_write_json, atomic_write_text
from pipeline.bench.throughput import IDLE_LOAD, BenchConfig
from pipeline.commands import add_options, add_verb
from pipeline.config.paths import BENCHMARKS_DIR


def _throughput_sizes(args: argparse.Namespace) -> None:
    from pipeline.bench.throughput_sizes import measure

    out = measure(
        args.preset, args.device, args.micro_batch, args.repeats, args.warmup, args.families, args.sizes, args.out
    )
    print(out.read_text(), end="")


def _write_report(result: dict, out: Path, summary: str) -> None:
    """A benchmark's ``result`` as JSON to ``out``, its Markdown ``summary`` beside it (``.md``) and to stdout."""
    atomic_write_json(out, result)
    atomic_write_text(out.with_suffix(".md"), summary)
    print(summary)


def _throughput(args: argparse.Namespace) -> None:
    from pipeline.bench.throughput import markdown, run_benchmark, wait_for_idle

    settings = {field.name: getattr(args, field.name) for field in dataclasses.fields(BenchConfig)}
    waited = wait_for_idle(IDLE_LOAD, 60 * args.wait_idle_minutes) if args.wait_idle_minutes > 0 else 0.0
    result = run_benchmark(BenchConfig(**settings))
    result["waited_for_idle_s"] = waited
    _write_report(result, args.out, markdown(result))
    if result["contended"]:
        print("WARNING: the host was busy during the run; the timings are not reliable.", file=sys.stderr)


def _jacobian(args: argparse.Namespace) -> None:
    from pipeline.bench.jacobian import run_benchmark, summary_markdown

    result = run_benchmark(args.tokens, args.hidden_dim, args.num_heads, args.repeats)
    _write_report(result, args.out, summary_markdown(result))


def _dag(args: argparse.Namespace) -> None:
    from pipeline.bench.dag import comparison_markdown, job_timings, kind_table, write_tables

    rows = kind_table(job_timings(args.workdir, args.preset))
    title = f"DAG time by phase: {args.label} ({args.preset} preset)"
    md, table = write_tables(rows, args.out_dir, args.label, title)
    print(md.read_text(), end="")
    print(f"wrote {md} and {table}")
    if args.baseline is not None:
        baseline = kind_table(job_timings(args.baseline, args.preset))
        compared = args.out_dir / f"dag-{args.label}-vs-baseline.md"
        compared.write_text(comparison_markdown(baseline, rows, f"{title} against {args.baseline}"))
        print(compared.read_text(), end="")
        print(f"wrote {compared}")


def _report_out(parser: argparse.ArgumentParser, name: str) -> None:
    """``--out`` of a benchmark: its JSON report, by default ``results/benchmarks/<name>``."""
    parser.add_argument(
        "--out",
        type=Path,
        default=BENCHMARKS_DIR / name,
        help=f"JSON report, Markdown summary beside it (default: results/benchmarks/{name})",
    )


def register(verbs: argparse._SubParsersAction) -> None:
    bench = verbs.add_parser(
        "bench",
        help="measured tables and benchmarks (throughput-sizes, throughput, jacobian, "
        "dag), written to results/benchmarks/",
    )
    benchmarks = bench.add_subparsers(dest="benchmark", required=True)

    sizes = add_verb(
        benchmarks,
        "throughput-sizes",
        _throughput_sizes,
        "training tokens/s per GPU of every model a preset trains: the table `cost` reads (on a GPU node)",
    )
    add_options(sizes, "--preset")
    sizes.add_argument("--device", help="device label of the table (default: from JAX, e.g. h100)")
    sizes.add_argument("--micro-batch", type=int, default=8, help="sequences per timed step (default 8)")
    sizes.add_argument("--repeats", type=int, default=5, help="timed steps per model (default 5)")
    sizes.add_argument("--warmup", type=int, default=2, help="untimed (compiling) steps per model (default 2)")
    sizes.add_argument("--families", nargs="+", help="only these families")
    sizes.add_argument("--sizes", nargs="+", help="only these sizes")
    sizes.add_argument(
        "--out", type=Path, help="table to write (default: results/benchmarks/throughput-sizes-<device>.csv)"
    )

    throughput = add_verb(
        benchmarks,
        "throughput",
        _throughput,
        "train step and inference of GPT vs DiffEqFormer at matched dimensions, side by side (App. D.1)",
    )
    for field in dataclasses.fields(BenchConfig):
        throughput.add_argument(
            f"--{field.name.replace('_', '-')}",
            type=field.type,
            default=field.default,
            help=f"default: {field.default}",
        )
    _report_out(throughput, "throughput-cpu.json")
    throughput.add_argument(
        "--wait-idle-minutes",
        type=float,
        default=0.0,
        help=f"first wait up to this long for the 1-min load average to drop below {IDLE_LOAD}",
    )

    jacobian = add_verb(
        benchmarks, "jacobian", _jacobian, "the Lyapunov analysis' single-query Jacobian vs the full sequence (App. B)"
    )
    jacobian.add_argument("--tokens", type=int, default=256, help="sequence length N (default: 256)")
    jacobian.add_argument("--hidden-dim", type=int, default=256, help="default: 256")
    jacobian.add_argument("--num-heads", type=int, default=4, help="default: 4")
    jacobian.add_argument("--repeats", type=int, default=5, help="timed calls of each (default: 5)")
    _report_out(jacobian, "lyapunov-jacobian-cpu.json")

    dag = add_verb(benchmarks, "dag", _dag, "per job kind, the split of a finished DAG's wall time into phases")
    dag.add_argument("workdir", type=Path, help="the DAG's working directory (snakemake --directory)")
    dag.add_argument("--label", required=True, help="names the tables: results/benchmarks/dag-<label>.{md,csv}")
    dag.add_argument("--preset", default="tiny", help="the preset the DAG ran (default: tiny)")
    dag.add_argument("--out-dir", type=Path, default=BENCHMARKS_DIR, help="default: results/benchmarks")
    dag.add_argument(
        "--baseline",
        type=Path,
        help="the same DAG's working directory as run by other code (same machine): also writes "
        "dag-<label>-vs-baseline.md, both side by side with their ratio",
    )
