"""Claims (4) and (6) on the analyses (docs/paper.md#claims): the spectra's growth with t per run, against the
untrained models as the control, and the clustering sweep's three parts of claim (6), each a fraction of seeds."""

from pathlib import Path

import pandas as pd

from pipeline.analysis.clustering import CLUSTER_CUTS, CLUSTERED_MAX_FRACTION, SWEEP_COLUMNS, clustered, degree_trend
from pipeline.analysis.spectra import spectral_trend
from pipeline.analysis.tidy import SPECTRA_COLUMNS
from pipeline.config.families import DIFFEQ_FAMILIES
from pipeline.report.claim_rows import claim
from pipeline.report.intervals import (
    CONTROL,
    NOT_TESTED,
    SENSITIVITY,
    Interval,
    binomial_interval,
    correlation_interval,
    fisher_z,
    sign_test,
)
from pipeline.report.power import CLUSTERING_PARTS
from pipeline.report.tidy_inputs import read_csv


def spectral_trends(paths: list[Path]) -> pd.DataFrame:
    """Per DiffEqFormer spectra file: ``spectral_trend`` (trained times) with its dataset and a fingerprint of its
    eigenvalues (untrained models of one config and seed are the same model whatever their dataset)."""
    trends = []
    for path in paths:
        table = read_csv(path, SPECTRA_COLUMNS, "spectra of the analysis stage")
        if table["family"].iloc[0] in DIFFEQ_FAMILIES:
            model = int(pd.util.hash_pandas_object(table[["matrix", "t", "head", "real", "imag"]], index=False).sum())
            trend = spectral_trend(table)
            trend["z"] = fisher_z(trend["rho"], trend["points"])
            trends.append(trend.assign(dataset=table["dataset"].iloc[0], run_id=path.stem, model=model))
    columns = ["matrix", "head", "rho", "points", "z", "dataset", "run_id", "model"]
    return pd.concat(trends) if trends else pd.DataFrame(columns=columns)


def spectra_claims(trained: list[Path], untrained: list[Path]) -> list[dict]:
    """(4) spectra grow with t: per run, the mean over heads of Fisher's z of Spearman ρ(t, head's largest |λ|) on
    the trained times (``spectral_trend``, ``fisher_z``), > 0, per dataset and matrix. The untrained models are the
    control, once each."""
    rows = [
        claim(
            f"(4) {matrix} spectrum grows with t, DiffEqFormer on {dataset}",
            "Fig. 2a/b",
            correlation_interval(trend.groupby("run_id")["z"].mean().tolist()),
            "Spearman ρ(trained t, largest |λ|), mean over a run's heads on Fisher's z",
            f"per head ρ from {trend['rho'].min():.2f} to {trend['rho'].max():.2f}",
            hypothesis="(4) spectra grow with t",
            claimed="above",
        )
        for (dataset, matrix), trend in spectral_trends(trained).groupby(["dataset", "matrix"])
    ]
    controls = spectral_trends(untrained).drop_duplicates(["model", "matrix", "head"])
    return rows + [
        claim(
            f"(4) control: {matrix} spectrum of untrained DiffEqFormers",
            "Fig. 2a/b",
            correlation_interval(trend.groupby("model")["z"].mean().tolist()),
            "Spearman ρ(trained t, largest |λ|), mean over a model's heads on Fisher's z",
            f"{trend['model'].nunique()} distinct models ({', '.join(sorted(set(trend['dataset'])))})",
            status=CONTROL,
        )
        for matrix, trend in controls.groupby("matrix")
    ]


def clustering_parts(sweep: pd.DataFrame, regime: str, cut: float) -> dict[str, tuple[Interval, str]]:
    """Claim (6)'s parts on ``regime`` at distance cut ``cut``, each a fraction of seeds with its Clopper–Pearson
    interval and exact binomial test of 50 %: (6a) the constant a(t) clusters, (6b) t⁴ does not, (6c) ρ(k, clusters)
    > 0 (the sign test, ties out)."""
    constant = clustered(sweep, regime, "constant", cut)
    spread_out = ~clustered(sweep, regime, "quartic", cut)
    trend = sign_test(degree_trend(sweep, regime, cut).tolist())
    values = [
        (binomial_interval(int(constant.sum()), len(constant)), "seeds"),
        (binomial_interval(int(spread_out.sum()), len(spread_out)), "seeds"),
        (trend.fraction, f"untied seeds ({trend.positive} vs {trend.negative}, ties {trend.ties})"),
    ]
    return dict(zip(CLUSTERING_PARTS, values, strict=True))


def clustering_claims(sweep_csv: Path | None) -> list[dict]:
    """(6) in three parts (``clustering_parts``) on the sweep's ``claim`` regime at the claim's cut, each primary
    (> 50 % of seeds, minimum effect ``power.EFFECT_FRACTION``), the ``control`` regime in their caption; other cuts
    and regimes are sensitivity rows."""
    if sweep_csv is None:
        return []
    sweep = read_csv(sweep_csv, SWEEP_COLUMNS, "the clustering sweep of the analysis stage")
    roles = sweep.drop_duplicates("regime").set_index("regime")
    if not set(roles["role"]) <= {"claim", "control", "sensitivity"} or (roles["role"] == "claim").sum() != 1:
        raise ValueError(
            f"{sweep_csv}: regime roles {dict(roles['role'])}; expected one claim, the rest control or sensitivity."
        )
    claim_regime = roles.index[roles["role"] == "claim"][0]
    controls = {
        cut: clustering_parts(sweep, name, cut)
        for name in roles.index[roles["role"] == "control"]
        for cut in CLUSTER_CUTS
    }
    rows = []
    for regime, cut in [(claim_regime, cut) for cut in CLUSTER_CUTS] + [
        (name, CLUSTER_CUTS[0]) for name in roles.index[roles["role"] == "sensitivity"]
    ]:
        primary = regime == claim_regime and cut == CLUSTER_CUTS[0]
        setting = roles.loc[regime]
        for part, (interval, among) in clustering_parts(sweep, regime, cut).items():
            control = controls[cut][part][0] if regime == claim_regime and cut in controls else None
            caption = (
                f"; equal-mean control {control.mean:.0%} [{control.low:.0%}, {control.high:.0%}]" if control else ""
            )
            rows.append(
                claim(
                    f"{part}: {regime} ({setting['role']}), cut {cut:g}",
                    "Fig. 2c/d",
                    interval,
                    f"fraction of {among}",
                    f"T = {setting['horizon']:g}, dt = {setting['dt']:g}; clusters: ≤ {CLUSTERED_MAX_FRACTION:.0%} of "
                    f"the tokens at single-linkage cut {cut:g}{caption}",
                    hypothesis=part if primary else None,
                    claimed="above",
                    threshold=0.5,
                    status=NOT_TESTED if primary else SENSITIVITY,
                )
            )
    return rows
