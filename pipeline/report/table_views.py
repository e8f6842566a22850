"""One table's files: the tidy CSV (one row per number) and its Markdown, LaTeX booktabs
(``\\toprule``/``\\midrule``/``\\bottomrule``) and HTML views (the one the Snakemake report embeds)."""

from pathlib import Path
from typing import NamedTuple

import pandas as pd

from pipeline.artifacts import atomic_write_text


class TableFiles(NamedTuple):
    """Where one table goes: the tidy CSV and its Markdown, HTML and (for the paper's tables) LaTeX views."""

    md: Path
    csv: Path
    html: Path
    tex: Path | None = None


def write_table(
    out: TableFiles, *, heading: str, note: str, tidy: pd.DataFrame, sections: dict[str, pd.DataFrame]
) -> None:
    """Write ``out.csv`` (``tidy``) and the Markdown, HTML and (where ``out.tex`` is given) LaTeX booktabs views of
    ``sections`` (title → wide table, its index as the first column)."""
    markdown = [f"# {heading}\n", f"{note}\n"]
    latex = [f"% {heading}. {note}\n"]
    html = [f"<h1>{heading}</h1>", f"<p>{note}</p>"]
    for title, section in sections.items():
        markdown.append(f"## {title}\n\n{section.to_markdown()}\n")
        styler = section.rename_axis(index=None, columns=None).style.format(escape="latex")
        latex.append(
            styler.format_index(escape="latex", axis=0)
            .format_index(escape="latex", axis=1)
            .to_latex(
                hrules=True,
                caption=title.replace("%", r"\%"),
                position="ht",
                position_float="centering",
                column_format="l" + "r" * section.shape[1],
            )
        )
        html.append(f"<h2>{title}</h2>{section.to_html(border=0)}")
    if out.tex is not None:
        atomic_write_text(out.tex, "\n".join(latex))
    style = "td,th{padding:2px 10px;text-align:right} thead{border-bottom:1px solid #444}"
    write_views(out, tidy, "\n".join(markdown), style, "".join(html))


def write_views(out: TableFiles, tidy: pd.DataFrame, markdown: str, cell_style: str, body: str) -> None:
    """``out.csv`` (``tidy``), ``out.md`` (``markdown``) and ``out.html``, a self-contained page of ``body``:
    sans-serif, collapsed table borders, cells styled ``cell_style``."""
    atomic_write_text(out.csv, tidy.to_csv(index=False))
    atomic_write_text(out.md, markdown)
    atomic_write_text(
        out.html,
        "<!DOCTYPE html><html><head><meta charset='utf-8'><style>body{font-family:sans-serif} "
        f"table{{border-collapse:collapse}} {cell_style}</style></head><body>{body}</body></html>\n",
    )
