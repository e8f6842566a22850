"""Verbs of the report stage: tables, figures and the scorecard from the stages' tidy files."""

import argparse
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

from pipeline.commands import add_options, add_verb


def _table_files(args: argparse.Namespace):
    from pipeline.report.table_views import TableFiles

    return TableFiles(md=args.md, csv=args.csv, html=args.html, tex=getattr(args, "tex", None))


def _write_table(args: argparse.Namespace) -> None:
    """A table verb's run: ``pipeline.report.tables.<args.writer>(args.inputs)`` written to the verb's views."""
    from pipeline.report import tables

    getattr(tables, args.writer)(args.inputs, out=_table_files(args))


TABLES = {
    # verb: its writer in pipeline.report.tables, its positional inputs' metavar and nargs, its help
    "perplexity-table": ("write_perplexity_tables", "summaries", "+", "Tables 1-2 from run summaries"),
    "spec-table": (
        "write_model_spec_table",
        "summaries",
        "+",
        "Table 3 from the runs' config.yaml (beside each summary.json)",
    ),
    "downstream-table": ("write_downstream_table", "csvs", "+", "Tables 4-5 from downstream.csv files"),
    "param-count-table": (
        "write_param_count_table",
        "param_counts.csv",
        None,
        "Table 6 from analysis/param_counts.csv",
    ),
}


def _runs_csv(args: argparse.Namespace) -> None:
    """The list of every pretraining run, ablations included, one row per summary."""
    from pipeline.artifacts import atomic_write_text
    from pipeline.report.tidy_inputs import load_summaries

    atomic_write_text(args.out, load_summaries(args.summaries).to_csv(index=False))


def _figure(args: argparse.Namespace) -> None:
    from pipeline.report import figures
    from pipeline.report.style import FigureFiles

    kind = args.kind
    expected = len(args.shots) if kind == "downstream" else 2 if kind in ("time-embed-dim", "clustering") else 1
    if not len(args.png) == len(args.pdf) == expected:
        raise ValueError(
            f"figure {kind}: --png and --pdf name {len(args.png)} and {len(args.pdf)} files; "
            f"expected {expected} each ({FIGURES[kind]})."
        )
    outs = [FigureFiles(png, pdf) for png, pdf in zip(args.png, args.pdf, strict=True)]
    if kind == "downstream":
        figures.downstream_figures(args.inputs, dict(zip(args.shots, outs, strict=True)))
    elif kind == "lyapunov":
        figures.lyapunov_figure(*args.inputs, *outs, output_token=args.output_token)
    elif kind in ("spectra", "clustering"):  # each input file is its own argument
        {"spectra": figures.spectra_figure, "clustering": figures.clustering_figures}[kind](*args.inputs, *outs)
    else:
        draw = {
            "curves": figures.curves_figure,
            "beta2": figures.beta2_figure,
            "time-embed-dim": figures.time_embed_dim_figures,
            "time-mlp-design": figures.time_mlp_design_figure,
            "memory": figures.memory_figure,
            "finetune": figures.finetune_figure,
            "frontier": figures.frontier_figure,
        }[kind]
        draw(args.inputs, *outs)


FIGURES = {
    "curves": "Figs. 4, 8: validation curves of one dataset and size (inputs: the runs' summary.json)",
    "beta2": "Fig. 7: Adam beta2 ablation (summary.json of the base and beta2 runs)",
    "time-embed-dim": "Figs. 14-15: perplexity then throughput vs D (summary.json of the D runs + GPT)",
    "memory": "Fig. 16: peak train-step memory vs D (the memory probes' JSON records)",
    "time-mlp-design": "Fig. 18: time-weight design ablation (summary.json of the two runs)",
    "finetune": "Fig. 5: fine-tune curves (the fine-tunes' summary.json)",
    "downstream": "Figs. 9-12: one figure per --shots k, in that order (downstream.csv of one pair)",
    "spectra": "Fig. 2a/b, App. E: one spectra CSV",
    "lyapunov": "Fig. 3, App. F: one Lyapunov CSV",
    "clustering": "Figs. 2c/d, 13: trajectories then cluster statistics (trajectories.csv stats.csv)",
    "frontier": "compute/quality frontier (the frontier CSVs)",
}


def _scorecard(args: argparse.Namespace) -> None:
    from pipeline.report.scorecard import ScorecardInputs, write_scorecard

    inputs = {field.name: getattr(args, field.name) for field in dataclasses.fields(ScorecardInputs)}
    inputs["overrides"] = json.loads(args.overrides)
    write_scorecard(ScorecardInputs(**inputs), out=_table_files(args))


def _power(args: argparse.Namespace) -> None:
    from pipeline.config import load_preset
    from pipeline.report.power import STUDY_CSV, design_table

    table = design_table(load_preset({"preset": args.preset}), args.study_csv or STUDY_CSV)
    print(table.to_markdown(index=False, floatfmt=".4g"))


def _fidelity_table(args: argparse.Namespace) -> None:
    import json

    from pipeline.report.fidelity import write_fidelity_table

    write_fidelity_table(json.loads(args.config_json), out=_table_files(args))


def _table_verb(
    verbs: argparse._SubParsersAction, name: str, run: Callable, help: str, *, tex: bool = True, **defaults
) -> argparse.ArgumentParser:
    """A verb that writes a table's views: ``--md``, ``--csv``, ``--html``, and ``--tex`` where ``tex``; ``defaults``
    as ``add_verb``'s."""
    table = add_verb(verbs, name, run, help, **defaults)
    table.add_argument("--md", type=Path, required=True, help="Markdown view")
    table.add_argument("--csv", type=Path, required=True, help="tidy CSV, one row per number")
    table.add_argument("--html", type=Path, required=True, help="HTML view (the one the Snakemake report embeds)")
    if tex:
        table.add_argument("--tex", type=Path, required=True, help="LaTeX booktabs view")
    return table


def register(verbs: argparse._SubParsersAction) -> None:
    for verb, (writer, metavar, nargs, help) in TABLES.items():
        table = _table_verb(verbs, verb, _write_table, help, writer=writer)
        table.add_argument("inputs", metavar=metavar, nargs=nargs, type=Path)

    table = add_verb(verbs, "runs-csv", _runs_csv, "CSV of every pretraining run from their summaries")
    table.add_argument("--out", type=Path, required=True)
    table.add_argument("summaries", nargs="+", type=Path)

    table = _table_verb(
        verbs,
        "fidelity-table",
        _fidelity_table,
        "the fidelity ledger for a resolved preset (.md, .csv, .html)",
        tex=False,
    )
    table.add_argument("--config-json", required=True, help="the resolved preset's PRESET_SECTIONS as JSON")

    kinds = "; ".join(f"{kind}: {text}" for kind, text in FIGURES.items())
    figure = add_verb(verbs, "figure", _figure, f"one figure (PNG + PDF), or several of one kind: {kinds}")
    figure.add_argument("kind", choices=sorted(FIGURES))
    figure.add_argument("--png", type=Path, nargs="+", required=True, help="PNG of each figure the kind draws")
    figure.add_argument("--pdf", type=Path, nargs="+", required=True, help="PDF of each, in the same order")
    figure.add_argument(
        "--shots",
        type=lambda text: [int(k) for k in text.split(",")],
        default=[],
        help="comma-separated shot counts (downstream only)",
    )
    figure.add_argument(
        "--output-token",
        type=int,
        default=-1,
        help="index of the output token j in each sentence (lyapunov only; analysis.lyapunov)",
    )
    figure.add_argument("--inputs", type=Path, nargs="+", required=True, help="the tidy files the figure reads")

    card = _table_verb(
        verbs, "scorecard", _scorecard, "our numbers and evidence beside the paper's numbers and claims", tex=False
    )
    card.add_argument("--preset", required=True)
    add_options(card, "--overrides")
    card.add_argument("--runs-csv", type=Path, required=True)
    for option, dest, help in (
        ("--finetune", "finetune_summaries", "fine-tune summary.json files"),
        ("--downstream", None, "downstream.csv files"),
        ("--spectra", None, "spectra CSVs"),
        ("--untrained-spectra", None, "spectra CSVs of the untrained models of the same configs (the control)"),
        ("--memory", None, "memory-probe JSON records"),
    ):
        card.add_argument(option, dest=dest, type=Path, nargs="*", default=[], help=help)
    card.add_argument("--clustering-sweep", type=Path)

    power = add_verb(
        verbs,
        "power",
        _power,
        "seeds per primary claim for 80 %% power at the Holm-corrected alpha, beside the seeds a preset gives it "
        "(docs/experiments.md)",
    )
    power.add_argument("--preset", required=True)
    power.add_argument(
        "--study-csv",
        type=Path,
        help="the scorecard CSV of the study whose per-seed spreads plan this one (default: the "
        "recorded mini study, pipeline.report.power.STUDY_CSV)",
    )
