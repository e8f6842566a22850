"""Claims (4) and (6) on the analyses (docs/paper.md#claims): the spectra's growth with t per run, against the
untrained models as the control, and the clustering sweep's per-seed cluster gap by its sign test."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pipeline.analysis.clustering import constant_clusters, paired_cluster_gap
from pipeline.analysis.spectra import spectral_trend
from pipeline.config.families import DIFFEQ_FAMILIES
from pipeline.report.claim_rows import claim
from pipeline.report.intervals import (
    CONTROL,
    NOT_TESTED,
    SENSITIVITY,
    binomial_interval,
    correlation_interval,
    sign_test,
)
from pipeline.report.tidy_inputs import read_csv


def spectral_trends(paths: list[Path]) -> pd.DataFrame:
    """Per DiffEqFormer spectra file: ``spectral_trend`` (trained times) with its dataset and a fingerprint of its
    eigenvalues (untrained models of one config and seed are the same model whatever their dataset)."""
    trends = []
    for path in paths:
        table = read_csv(
            path,
            ["run_id", "family", "dataset", "matrix", "t", "layer", "head", "real", "imag"],
            "spectra of the analysis stage",
        )
        if table["family"].iloc[0] in DIFFEQ_FAMILIES:
            model = int(pd.util.hash_pandas_object(table[["matrix", "t", "head", "real", "imag"]], index=False).sum())
            trends.append(spectral_trend(table).assign(dataset=table["dataset"].iloc[0], run_id=path.stem, model=model))
    return (
        pd.concat(trends) if trends else pd.DataFrame(columns=["matrix", "head", "rho", "dataset", "run_id", "model"])
    )


def spectra_claims(trained: list[Path], untrained: list[Path]) -> list[dict]:
    """(4) spectra grow with t: per run, the mean over heads of Spearman ρ(t, head's largest |λ|) on the trained
    times (``spectral_trend``), > 0, per dataset and matrix. The untrained models are the control, once each."""
    rows = []
    for (dataset, matrix), trend in spectral_trends(trained).groupby(["dataset", "matrix"]):
        rows.append(
            claim(
                f"(4) {matrix} spectrum grows with t, DiffEqFormer on {dataset}",
                "Fig. 2a/b",
                correlation_interval(trend.groupby("run_id")["rho"].mean().tolist()),
                "Spearman ρ(trained t, largest |λ|), mean over a run's heads",
                f"per head ρ from {trend['rho'].min():.2f} to {trend['rho'].max():.2f}",
                hypothesis="(4) spectra grow with t",
                claimed="above",
            )
        )
    controls = spectral_trends(untrained).drop_duplicates(["model", "matrix", "head"])
    for matrix, trend in controls.groupby("matrix"):
        rows.append(
            claim(
                f"(4) control: {matrix} spectrum of untrained DiffEqFormers",
                "Fig. 2a/b",
                correlation_interval(trend.groupby("model")["rho"].mean().tolist()),
                "Spearman ρ(trained t, largest |λ|), mean over a model's heads",
                f"{trend['model'].nunique()} distinct models ({', '.join(sorted(set(trend['dataset'])))})",
                status=CONTROL,
            )
        )
    return rows


def clustering_claims(sweep_csv: Path | None) -> list[dict]:
    """(6) no clustering without weight sharing, on the sweep's ``claim`` regime: per seed the gap
    clusters(t⁴) − clusters(constant), its exact sign test (ties dropped) and the fraction of seeds with a positive
    gap (Clopper–Pearson); the ``control`` regime (equal mean strength) and ``sensitivity`` regimes alike, no
    verdict."""
    if sweep_csv is None:
        return []
    sweep = read_csv(
        sweep_csv,
        ["regime", "role", "horizon", "dt", "seed", "magnitude", "tokens", "n_clusters"],
        "the clustering sweep of the analysis stage",
    )
    status = {"claim": None, "control": CONTROL, "sensitivity": SENSITIVITY}
    rows = []
    for (role, regime), runs in sweep.groupby(["role", "regime"], sort=False):
        if role not in status:
            raise ValueError(
                f"{sweep_csv}: role {role!r} of regime {regime!r}; expected claim, control or sensitivity."
            )
        gap = paired_cluster_gap(runs, regime)
        signs = sign_test(gap.tolist())
        together = binomial_interval(int(constant_clusters(runs, regime).sum()), len(gap))
        rows.append(
            claim(
                f"(6) t⁴ ends with more clusters than the constant a(t): {regime} ({role})",
                "Fig. 2c/d",
                signs.fraction,
                "fraction of seeds clusters(t⁴) > clusters(constant)",
                f"T = {runs['horizon'].iloc[0]:g}, dt = {runs['dt'].iloc[0]:g}; median gap "
                f"{gap.median():g} clusters; sign test {signs.positive} vs {signs.negative} (ties {signs.ties}); "
                f"the constant clusters in {together.mean:.0%} [{together.low:.0%}, {together.high:.0%}]",
                hypothesis="(6) no clustering without weight sharing" if role == "claim" else None,
                claimed="above",
                threshold=0.5,
                status=status[role] or NOT_TESTED,
            )
            | {"direction": signs.balance}
        )
    return rows
