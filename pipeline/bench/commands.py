"""Verbs of the bench stage: ``fit`` (per-device memory of every run's train step, fine-tune and lm-eval forward pass,
planned on CPU by XLA) and
``bench dag`` (a finished DAG's wall time by phase, ``pipeline.bench.dag``)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipeline.bench import dag
from pipeline.config import REPO_ROOT, load_preset


def _fit(args: argparse.Namespace) -> None:
    from pipeline.bench.fit import write_fit

    config = load_preset({"preset": args.preset})
    out_dir = REPO_ROOT / "results" / config["preset"]
    runs = args.runs.split(",") if args.runs else None
    md, table = args.md or out_dir / "fit.md", args.csv or out_dir / "fit.csv"
    rows = write_fit(config, args.device, args.gpus, runs, md, table)
    logging.info("fit finished: %d workloads, %d fit at the paper batch, %d with gradient accumulation, %d do not fit",
                 len(rows), sum(r["fits_at_paper_batch"] for r in rows),
                 sum(r["fits"] and not r["fits_at_paper_batch"] for r in rows), sum(not r["fits"] for r in rows))


def register(verbs: argparse._SubParsersAction) -> None:
    fit = verbs.add_parser("fit", help="per-device memory of every run, fine-tune and lm-eval pass on a GPU, "
                                       "planned on CPU by XLA")
    fit.add_argument("--preset", default="paper", help="preset name or YAML path (default: paper)")
    fit.add_argument("--device", default="h100", help="GPU whose memory the plan is checked against (default: h100)")
    fit.add_argument("--gpus", type=int, default=8,
                     help="GPUs per training job, the FSDP mesh size (default: 8, the slurm profile's)")
    fit.add_argument("--runs", default=None,
                     help="comma-separated ids to plan: runs, probes, fine-tunes, downstream-<run> (default: all)")
    fit.add_argument("--md", type=Path, default=None, help="markdown table (default: results/<preset>/fit.md)")
    fit.add_argument("--csv", type=Path, default=None, help="CSV table (default: results/<preset>/fit.csv)")
    fit.set_defaults(run=_fit)
    dag.register(verbs)
