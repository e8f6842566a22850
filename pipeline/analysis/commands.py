"""Verbs of the analysis stage: ``spectra``, ``lyapunov``, ``frontier`` (each one Ray task on a trained run),
``memory-probe`` (one Ray task measuring a train step, Fig. 16), ``clustering`` (a CPU simulation) and
``param-counts`` (Table 6 from shapes)."""

import argparse
import json
import logging
from pathlib import Path

from pipeline.commands import absolute, add_options, add_ray_options, add_verb, run_task


def _spectra(args: argparse.Namespace) -> None:
    paths = absolute(args.run_dir, args.tokenizer, args.out)
    run_task(
        args, "pipeline.analysis.spectra:run_spectra", *paths, args.time_oversampling, *absolute(args.untrained_out)
    )


def _lyapunov(args: argparse.Namespace) -> None:
    paths = absolute(args.run_dir, args.tokenizer, args.out, args.html)
    run_task(args, "pipeline.analysis.lyapunov:run_lyapunov", *paths, json.loads(args.sentences), args.output_token)


def _frontier(args: argparse.Namespace) -> None:
    run_task(
        args,
        "pipeline.analysis.frontier:run_frontier",
        *absolute(args.run_dir, args.cache, args.tokenizer, args.out),
        json.loads(args.step_factors),
        json.loads(args.solvers),
        args.batch_size,
        args.max_batches,
    )


def _memory_probe(args: argparse.Namespace) -> None:
    paths = absolute(args.tokenizer, args.out)
    run_task(args, "pipeline.analysis.memory:probe_memory", args.spec, *paths, args.steps, fresh_process=True)


def _clustering(args: argparse.Namespace) -> None:
    from pipeline.analysis.clustering import write_clustering

    stats = write_clustering(str(args.out_dir), json.loads(args.settings))
    logging.info("clustering finished: %s", json.dumps(stats))


def _param_counts(args: argparse.Namespace) -> None:
    import pandas as pd

    from pipeline.analysis.tidy import PARAM_COUNT_COLUMNS
    from pipeline.artifacts import atomic_write_text
    from pipeline.models import baseline_param_counts, table6_param_counts

    rows = [("diffeq-gpt-large", d, n) for d, n in table6_param_counts().items()]
    rows += [(name, None, n) for name, n in baseline_param_counts().items()]
    table = pd.DataFrame(rows, columns=PARAM_COUNT_COLUMNS).astype({"time_embed_dim": "Int64"})
    atomic_write_text(args.out, table.to_csv(index=False))
    logging.info("param-counts finished: %d rows", len(table))


RUN_DIR = "a trained run folder (results/<p>/runs/<run>)"


def _task_options(parser: argparse.ArgumentParser, *flags: str, out: str = "the tidy CSV", **helps: str) -> None:
    """A Ray task verb's shared options ``flags`` (``add_options``, ``helps`` by destination), its ``--out`` file
    (help ``out``) and the Ray options of a GPU task."""
    add_options(parser, *flags, **helps)
    parser.add_argument("--out", type=Path, required=True, help=out)
    add_ray_options(parser, gpus=True)


def register(verbs: argparse._SubParsersAction) -> None:
    spectra = add_verb(verbs, "spectra", _spectra, "QK/OV eigenvalues of every head over t (§5.1, App. E)")
    _task_options(spectra, "--run-dir", "--tokenizer", run_dir=RUN_DIR)
    spectra.add_argument("--time-oversampling", type=int, required=True, help="DiffEqFormer: t grid k·L fine")
    spectra.add_argument(
        "--untrained-out",
        type=Path,
        required=True,
        help="the tidy CSV of an untrained model of the run's config (the control)",
    )

    lyapunov = add_verb(verbs, "lyapunov", _lyapunov, "Lyapunov token sensitivity of sentences (§5.2, App. B)")
    _task_options(lyapunov, "--run-dir", "--tokenizer", run_dir=RUN_DIR)
    lyapunov.add_argument("--sentences", required=True, help="JSON list of sentences")
    lyapunov.add_argument("--output-token", type=int, required=True, help="index j of the output token")
    lyapunov.add_argument("--html", type=Path, required=True, help="the heat-map page")

    frontier = add_verb(verbs, "frontier", _frontier, "validation loss vs solver and number of steps")
    _task_options(frontier, "--run-dir", "--cache", "--tokenizer", run_dir=RUN_DIR)
    frontier.add_argument("--step-factors", required=True, help="JSON list of N/L")
    frontier.add_argument("--solvers", required=True, help="JSON list of euler|heun|rk4")
    frontier.add_argument("--batch-size", type=int, default=32)
    frontier.add_argument("--max-batches", type=int, help="default: the whole validation split")

    memory = add_verb(
        verbs, "memory-probe", _memory_probe, "peak memory of one train step of a probe (App. D, Fig. 16)"
    )
    memory.add_argument("--spec", required=True, help="the probe's resolved RunSpec, as JSON")
    memory.add_argument("--steps", type=int, required=True, help="train steps to run before reading the peak")
    tokenizer = "the probe's tokenizer folder (vocabulary)"
    _task_options(memory, "--tokenizer", out="the probe's JSON record", tokenizer=tokenizer)

    clustering = add_verb(verbs, "clustering", _clustering, "attention-only ODE clustering simulation (App. C.8)")
    clustering.add_argument("--settings", required=True, help="the preset's analysis.clustering, as JSON")
    clustering.add_argument("--out-dir", type=Path, required=True)

    param_counts = add_verb(verbs, "param-counts", _param_counts, "Table 6 and Table 3 baselines' parameter counts")
    param_counts.add_argument("--out", type=Path, required=True)
