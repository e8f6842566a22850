"""One look for every figure: seaborn theme, a fixed colour per model family, atomic PNG + PDF output. Imported only
inside the figure verbs (it imports matplotlib)."""

import logging
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

from pipeline.artifacts import atomic_file  # noqa: E402
from pipeline.config.families import FAMILY_LABELS  # noqa: E402

FAMILY_COLOURS = dict(zip(FAMILY_LABELS.values(), sns.color_palette("colorblind", len(FAMILY_LABELS)), strict=True))
"""Colour of each model family (by its display label), the same in every figure."""
PANEL_SIZE_IN = (3.6, 2.8)  # one panel: width, height
DPI = 150


class FigureFiles(NamedTuple):
    """Where one figure goes: the PNG (the report shows it) and the PDF."""

    png: Path
    pdf: Path


@contextmanager
def house_figure(out: FigureFiles, rows: int = 1, columns: int = 1, **kwargs):
    """A figure of ``rows × columns`` panels of the house size in seaborn's ``paper`` context on a white grid
    (fontTools' per-glyph INFO logging of PDF output silenced), written when the block ends without an error to
    ``out.png`` and ``out.pdf``, each through a temporary file and a rename."""
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.0)
    plt.rcParams.update({"figure.dpi": DPI, "legend.frameon": False})
    logging.getLogger("fontTools").setLevel(logging.WARNING)
    size = (PANEL_SIZE_IN[0] * columns, PANEL_SIZE_IN[1] * rows)
    figure, axes = plt.subplots(rows, columns, figsize=size, squeeze=False, layout="constrained", **kwargs)
    yield figure, axes
    for path in out:
        with atomic_file(path) as tmp:
            figure.savefig(tmp, dpi=DPI, format=path.suffix.removeprefix("."))
    plt.close(figure)
