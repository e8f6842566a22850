"""The paper's claims (docs/paper.md#claims) in the paper's order, each one statistic per seed and its test
(``pipeline.report.intervals``); a single run is the n = 1 case (no interval, no verdict, and the row says so).

Comparisons of two families are paired: both runs of a seed share its data order, so the statistic is the per-seed
difference. Losses are validation cross-entropies (nats), so a difference is Δ log-perplexity. A row of a primary
claim names its ``hypothesis`` (``pipeline.report.power``), the side it claims and its threshold; the scorecard
decides it after Holm's correction. Other rows carry their fixed status (not tested, control, sensitivity).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pipeline.report.analysis_claims import clustering_claims, spectra_claims
from pipeline.report.finetune_claims import finetune_claims, load_finetunes, overfit_claims
from pipeline.report.pretrain_claims import perplexity_claims, sharing_claims, throughput_claims


def seeded_claims(
    runs: pd.DataFrame,
    finetune_summaries: list[Path],
    spectra: list[Path],
    untrained_spectra: list[Path],
    clustering_sweep: Path | None,
) -> list[dict]:
    """Claims (1)-(7), in the paper's order."""
    finetunes = load_finetunes(finetune_summaries)
    return (
        perplexity_claims(runs)
        + finetune_claims(finetunes)
        + overfit_claims(finetunes)
        + spectra_claims(spectra, untrained_spectra)
        + sharing_claims(runs)
        + clustering_claims(clustering_sweep)
        + throughput_claims(runs)
    )
