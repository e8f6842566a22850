"""Verbs of the report stage: tables (and figures) from tidy summaries."""

from __future__ import annotations

import argparse
from pathlib import Path


def _perplexity_table(args: argparse.Namespace) -> None:
    from pipeline.report.tables import write_perplexity_tables

    write_perplexity_tables(args.summaries, markdown=args.markdown, csv=args.csv, runs_csv=args.runs_csv)


def register(verbs: argparse._SubParsersAction) -> None:
    table = verbs.add_parser("perplexity-table", help="Tables 1-2 from run summaries")
    table.add_argument("--markdown", type=Path, required=True)
    table.add_argument("--csv", type=Path, required=True)
    table.add_argument("--runs-csv", type=Path, required=True)
    table.add_argument("summaries", nargs="+", type=Path)
    table.set_defaults(run=_perplexity_table)
