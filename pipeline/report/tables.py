"""Tables generated from the runs' ``summary.json`` files (tidy data first, then Markdown/CSV views).

Tables 1 and 2 of the paper: validation perplexity per dataset, model size and family
(GPT / Llama baselines, the weight-sharing baseline and DiffEqFormer).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from pipeline.artifacts import atomic_write_text

FAMILY_LABELS = {
    "gpt": "GPT",
    "shared": "Shared parameter",
    "diffeq": "DiffEqFormer",
    "llama": "Llama",
    "diffeq_llama": "DiffEqFormer (Llama)",
}
DATASET_TABLES = {"wt103": "Table 1: WikiText-103", "owt": "Table 2: OpenWebText"}
SIZE_ORDER = ["small", "medium", "large", "llama1b", "ft18", "ft24"]
RUN_COLUMNS = ["run_id", "preset", "dataset", "size", "family", "role", "ablation", "parameters", "steps",
               "tokens_seen", "final_train_loss", "val_loss", "val_ppl", "mean_tokens_per_s"]


def load_summaries(paths: list[Path]) -> pd.DataFrame:
    """One row per run, the columns of ``RUN_COLUMNS``; a missing key fails naming the file."""
    rows = []
    for path in paths:
        summary = json.loads(Path(path).read_text())
        missing = [column for column in RUN_COLUMNS if column not in summary]
        if missing:
            raise ValueError(f"{path}: key {missing[0]!r} is missing; expected a summary written by pretrain.")
        rows.append({column: summary[column] for column in RUN_COLUMNS})
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


def perplexity_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Tidy Tables 1-2: the paper's rows (role ``table``), sorted by dataset, size and family."""
    table = runs[runs["role"] == "table"].copy()
    table["model"] = table["family"].map(FAMILY_LABELS)
    table["size_rank"] = table["size"].map({size: rank for rank, size in enumerate(SIZE_ORDER)})
    table["family_rank"] = table["family"].map({family: rank for rank, family in enumerate(FAMILY_LABELS)})
    table = table.sort_values(["dataset", "size_rank", "family_rank"], ascending=[False, True, True])
    return table[["dataset", "size", "model", "run_id", "parameters", "tokens_seen", "val_ppl"]]


def perplexity_markdown(table: pd.DataFrame, preset: str) -> str:
    """One Markdown table per dataset: models as rows, sizes as columns, cells 'ppl (params)'."""
    sections = [f"# Validation perplexity (preset `{preset}`)\n",
                "Cells: validation perplexity over the whole validation split (parameters). Lower is better.\n"]
    for dataset, title in DATASET_TABLES.items():
        rows = table[table["dataset"] == dataset]
        if rows.empty:
            continue
        cells = rows.assign(cell=[f"{ppl:.2f} ({params / 1e6:.2f}M)" for ppl, params
                                  in zip(rows["val_ppl"], rows["parameters"], strict=True)])
        wide = cells.pivot(index="model", columns="size", values="cell")
        wide = wide.reindex(index=[m for m in FAMILY_LABELS.values() if m in wide.index],
                            columns=[s for s in SIZE_ORDER if s in wide.columns]).fillna("–")
        sections.append(f"## {title}\n\n{wide.to_markdown()}\n")
    return "\n".join(sections)


def write_perplexity_tables(summaries: list[Path], *, markdown: Path, csv: Path, runs_csv: Path) -> None:
    runs = load_summaries(summaries)
    table = perplexity_table(runs)
    preset = runs["preset"].iloc[0]
    atomic_write_text(runs_csv, runs.to_csv(index=False))
    atomic_write_text(csv, table.to_csv(index=False))
    atomic_write_text(markdown, perplexity_markdown(table, preset))
