"""The paper's claims (docs/paper.md#claims) over runs repeated at several seeds: each claim's per-seed statistic, its
95 % interval (``pipeline.report.intervals``) and the verdict that interval gives, in the paper's order.

Comparisons of two families are paired: both runs of a seed share its data order, so the interval is that of the
per-seed differences. Losses are validation cross-entropies (nats), so a difference is Δ log-perplexity.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pipeline.analysis.spectra import spectral_trend
from pipeline.families import DIFFEQ_FAMILIES, FAMILY_LABELS, SHARED_FAMILIES
from pipeline.report.claim_rows import row
from pipeline.report.intervals import Interval, paired_interval, t_interval, verdict
from pipeline.report.tables import eval_curve, read_csv, read_json, require_columns

TRAIN_COST_GOAL = 1.15
"""Paper App. D.1: DiffEqFormer trains at most ~1.15× slower than GPT, i.e. throughput ratio ≥ 1/1.15."""
CLUSTERED_MAX_FRACTION = 0.5
"""A final state clusters when it has at most this fraction of its tokens' count of clusters."""


def claim(item: str, source: str, interval: Interval, threshold: float, claimed: str, unit: str,
          evidence: str) -> dict:
    """A scorecard row of a claim: the statistic's mean and interval, and the verdict of ``intervals.verdict``."""
    return row("claim", item, source, ours=interval.mean, low=interval.low, high=interval.high,
               deviation=interval.mean - threshold, unit=unit, status=verdict(interval, threshold, claimed),
               evidence=f"{evidence}; claimed {claimed} {threshold:g}; n={interval.n}")


def by_seed(frame: pd.DataFrame, column: str) -> dict[int, float]:
    return dict(zip(frame["seed"].astype(int), frame[column].astype(float), strict=True))


def perplexity_claims(runs: pd.DataFrame) -> list[dict]:
    """(1) DiffEqFormer ≤ GPT validation perplexity at equal configuration, per table group: Δ val_loss < 0."""
    rows = []
    for group, runs_of_group in runs[runs["role"] == "table"].groupby("group", sort=False):
        families = {family: by_seed(rows_of_family, "val_loss")
                    for family, rows_of_family in runs_of_group.groupby("family")}
        if {"gpt", "diffeq"} <= set(families):
            interval = paired_interval(families["diffeq"], families["gpt"])
            rows.append(claim(f"(1) DiffEqFormer ≤ GPT validation perplexity, {group}", "Tables 1-2", interval, 0.0,
                              "below", "Δ log-ppl (DiffEqFormer − GPT, paired by seed)",
                              f"mean ppl DiffEqFormer {_mean_ppl(runs_of_group, 'diffeq'):.2f} vs GPT "
                              f"{_mean_ppl(runs_of_group, 'gpt'):.2f}"))
    return rows


def _mean_ppl(runs: pd.DataFrame, family: str) -> float:
    return float(runs.loc[runs["family"] == family, "val_ppl"].mean())


def load_finetunes(paths: list[Path]) -> pd.DataFrame:
    """One row per fine-tune summary, with its over-fitting: final − best validation loss over its curve."""
    rows = []
    for path in paths:
        summary = read_json(path)
        require_columns(summary, ["family", "source_dataset", "target_dataset", "method", "num_steps", "seed",
                                  "val_loss"], path, "a fine-tune summary written by the finetune stage")
        rows.append({**summary, "overfit": summary["val_loss"] - eval_curve(path)["eval_loss"].min()})
    return pd.DataFrame(rows)


def finetune_claims(finetunes: pd.DataFrame) -> list[dict]:
    """(2) fine-tunes of the DiffEqFormer resampled to each N′ beat the GPT baseline's fine-tune of the same method:
    Δ val_loss < 0 per (direction, method, N′)."""
    rows = []
    for (source, target, method), runs in finetunes.groupby(["source_dataset", "target_dataset", "method"]):
        diffeq = runs["family"].isin(DIFFEQ_FAMILIES)
        baseline = by_seed(runs[~diffeq], "val_loss")
        for num_steps, ours in runs[diffeq].groupby("num_steps"):
            interval = paired_interval(by_seed(ours, "val_loss"), baseline)
            rows.append(claim(f"(2) {method} DiffEqFormer N′={num_steps} beats GPT, {source}→{target}", "Fig. 5",
                              interval, 0.0, "below", "Δ log-ppl (DiffEqFormer − GPT, paired by seed)",
                              f"mean ppl {ours['val_ppl'].mean():.2f} vs GPT {runs[~diffeq]['val_ppl'].mean():.2f}"))
    return rows


def overfit_claims(finetunes: pd.DataFrame) -> list[dict]:
    """(3) fewer steps over-fit less on the small corpus: per seed, Spearman ρ(N′, final − best validation loss) of
    the full DiffEqFormer fine-tunes into it, > 0."""
    full = finetunes[(finetunes["method"] == "full") & finetunes["family"].isin(DIFFEQ_FAMILIES)
                     & (finetunes["target_dataset"] == "wt103")]
    rows = []
    for source, runs in full.groupby("source_dataset"):
        rhos = [float(seed_runs["num_steps"].corr(seed_runs["overfit"], method="spearman"))
                for _, seed_runs in runs.groupby("seed")]
        largest = runs["overfit"].max()
        rows.append(claim(f"(3) fewer steps over-fit less on WikiText-103 (full, from {source})", "Fig. 5",
                          t_interval(rhos), 0.0, "above", "Spearman ρ(N′, final − best val_loss) per seed",
                          f"largest over-fit {largest:.3g} nats" + (" (no over-fitting)" if largest <= 0 else "")))
    return rows


def spectra_claims(trained: list[Path], untrained: list[Path]) -> list[dict]:
    """(4) spectra grow with t: Spearman ρ of each head's largest |λ| against t (``spectral_trend``), averaged over
    the heads of a run (heads of one model are not independent), > 0; the interval is across the runs (seeds) of each
    DiffEqFormer dataset and matrix. The untrained models of the same runs are the control."""
    rows = []
    for label, paths in (("trained", trained), ("untrained control", untrained)):
        trends = []
        for path in paths:
            table = read_csv(path, ["run_id", "family", "dataset", "matrix", "t", "head", "real", "imag"],
                             "spectra of the analysis stage")
            if table["family"].iloc[0] in DIFFEQ_FAMILIES:
                trends.append(spectral_trend(table).assign(dataset=table["dataset"].iloc[0], run_id=path.stem))
        if not trends:
            continue
        for (dataset, matrix), trend in pd.concat(trends).groupby(["dataset", "matrix"]):
            rows.append(claim(f"(4) {matrix} spectrum grows with t, DiffEqFormer on {dataset} ({label})", "Fig. 2a/b",
                              t_interval(trend.groupby("run_id")["rho"].mean().tolist()), 0.0, "above",
                              "Spearman ρ(t, largest |λ|), mean over a run's heads",
                              f"per head ρ from {trend['rho'].min():.2f} to {trend['rho'].max():.2f}"))
    return rows


def sharing_claims(runs: pd.DataFrame) -> list[dict]:
    """(5) weight sharing is worse: per seed, the shared model's val_loss − the best other model's, > 0."""
    rows = []
    for group, runs_of_group, wide in _by_seed(runs, "val_loss"):
        others = wide[[family for family in wide.columns if family not in SHARED_FAMILIES]].min(axis=1)
        for family in [family for family in wide.columns if family in SHARED_FAMILIES]:
            rows.append(claim(f"(5) weight sharing is worse: {FAMILY_LABELS[family]}, {group}", "Table 1",
                              t_interval((wide[family] - others).tolist()), 0.0, "above",
                              "Δ log-ppl (shared − best other, paired by seed)",
                              f"mean ppl {_mean_ppl(runs_of_group, family):.2f}"))
    return rows


def clustering_claims(sweep_csv: Path | None) -> list[dict]:
    """(6) no clustering without weight sharing: per seed of the notebook sweep, 1 when the constant a(t) clusters
    and t⁴ does not, else 0; the mean (fraction of seeds) > 0.5, per regime."""
    if sweep_csv is None:
        return []
    rows = []
    for horizon, normalised, regime, wide, holds in clustering_regimes(sweep_csv):
        scaling = "normalised" if normalised else "unnormalised"
        together = clustered(wide, regime)
        seeds = len(wide)
        rows.append(claim(f"(6) weight sharing clusters, t⁴ does not: T = {horizon:g}, a(t) {scaling}", "Fig. 2c/d",
                          t_interval(holds.tolist()), 0.5, "above", "fraction of seeds",
                          f"{seeds} sweep seeds: the constant clusters in {together['constant'].sum()}, t⁴ does not "
                          f"in {(~together['quartic']).sum()}, t⁴ ends with more clusters than the constant in "
                          f"{(wide['quartic'] > wide['constant']).sum()}"))
    return rows


def throughput_claims(runs: pd.DataFrame) -> list[dict]:
    """(7) training throughput only slightly below GPT's: per seed DiffEqFormer / GPT tokens/s ≥ 1/1.15."""
    rows = []
    for group, _, wide in _by_seed(runs, "mean_tokens_per_s"):
        if {"gpt", "diffeq"} <= set(wide.columns):
            rows.append(claim(f"(7) throughput only slightly below GPT, {group}", "Fig. 15",
                              t_interval((wide["diffeq"] / wide["gpt"]).tolist()), 1 / TRAIN_COST_GOAL, "above",
                              "throughput ratio DiffEqFormer / GPT (paired by seed)",
                              "mean tokens/s after the compiling first step; jobs sharing a CPU make it noisy"))
    return rows


def seeded_claims(runs: pd.DataFrame, finetune_summaries: list[Path], spectra: list[Path],
                  untrained_spectra: list[Path], clustering_sweep: Path | None) -> list[dict]:
    """Claims (1)-(7) of the study, in the paper's order."""
    finetunes = load_finetunes(finetune_summaries) if finetune_summaries else pd.DataFrame(
        columns=["family", "source_dataset", "target_dataset", "method", "num_steps", "seed", "val_loss", "overfit"])
    return (perplexity_claims(runs) + finetune_claims(finetunes) + overfit_claims(finetunes)
            + spectra_claims(spectra, untrained_spectra) + sharing_claims(runs) + clustering_claims(clustering_sweep)
            + throughput_claims(runs))


def _by_seed(runs: pd.DataFrame, values: str):
    """Per group of the perplexity tables: its runs and ``values`` as a seed × family table (pairs by seed)."""
    for group, runs_of_group in runs[runs["role"] == "table"].groupby("group", sort=False):
        yield group, runs_of_group, runs_of_group.pivot(index="seed", columns="family", values=values)


def clustering_regimes(sweep_csv: Path):
    """Per regime (horizon T, a(t) normalised or not) of the clustering sweep: its rows, clusters as a seed ×
    magnitude table, and per seed whether the constant a(t) clusters (at most ``CLUSTERED_MAX_FRACTION`` of the
    tokens as clusters) and t⁴ does not (1.0 or 0.0)."""
    sweep = read_csv(sweep_csv, ["horizon", "normalised", "seed", "magnitude", "tokens", "n_clusters"],
                     "the clustering sweep of the analysis stage")
    for (horizon, normalised), regime in sweep.groupby(["horizon", "normalised"]):
        wide = regime.pivot(index="seed", columns="magnitude", values="n_clusters")
        together = clustered(wide, regime)
        yield horizon, normalised, regime, wide, (together["constant"] & ~together["quartic"]).astype(float)


def clustered(wide: pd.DataFrame, regime: pd.DataFrame) -> pd.DataFrame:
    """Per seed × magnitude of a regime's clusters table ``wide``: whether the final state has at most
    ``CLUSTERED_MAX_FRACTION`` of the regime's tokens as clusters."""
    return wide <= CLUSTERED_MAX_FRACTION * regime["tokens"].iloc[0]
