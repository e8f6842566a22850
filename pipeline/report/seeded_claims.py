"""The paper's claims (docs/paper.md#claims), each one statistic per seed and its test (``pipeline.report.intervals``),
in the paper's order; a single run is the n = 1 case (no interval, no verdict).

Comparisons of two families are paired: both runs of a seed share its data order, so the statistic is the per-seed
difference. Losses are validation cross-entropies (nats), so a difference is Δ log-perplexity. A row of a primary
claim names its ``hypothesis`` (``pipeline.report.power``), the side it claims and its threshold; the scorecard
decides it after Holm's correction. Other rows carry their fixed status (not tested, control, sensitivity).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pipeline.analysis.clustering import constant_clusters, paired_cluster_gap
from pipeline.analysis.spectra import spectral_trend
from pipeline.config.families import DIFFEQ_FAMILIES, FAMILY_LABELS, SHARED_FAMILIES
from pipeline.report.claim_rows import row
from pipeline.report.intervals import (
    CONTROL,
    NOT_TESTED,
    SENSITIVITY,
    Interval,
    binomial_interval,
    correlation_interval,
    paired_differences,
    t_interval,
    tost_p,
)
from pipeline.report.power import EQUIVALENCE_MARGIN
from pipeline.report.tables import eval_curve, read_csv, read_json, require_columns

TRAIN_COST_GOAL = 1.15
"""Paper App. D.1: DiffEqFormer trains at most ~1.15× slower than GPT, i.e. throughput ratio ≥ 1/1.15."""
PLATEAU_EVALUATIONS, PLATEAU_NATS = 3, 0.02
"""A fine-tune's curve has plateaued when its last 3 evaluations lower the best validation loss before them by
less than 0.02 nats in total (docs/experiments.md, "The mini study")."""
FAMILY_PAIRS = (("gpt", "diffeq"), ("llama", "diffeq_llama"))


def claim(
    item: str,
    source: str,
    interval: Interval,
    unit: str,
    evidence: str,
    *,
    hypothesis: str | None = None,
    claimed: str = "",
    threshold: float = 0.0,
    status: str = NOT_TESTED,
) -> dict:
    """A claim's row: the statistic's mean, interval and p; ``hypothesis`` names a primary claim (decided by the
    scorecard, ``claimed`` "above", "below" or "equivalent" of ``threshold``), else ``status`` stands."""
    spread = "" if interval.n > 1 else "; n = 1: no interval, no verdict"
    return {
        **row(
            "claim",
            item,
            source,
            ours=interval.mean,
            low=interval.low,
            high=interval.high,
            p=interval.p,
            deviation=interval.mean - threshold,
            unit=unit,
            status=status,
            evidence=f"{evidence}; n={interval.n}{spread}",
        ),
        "hypothesis": hypothesis,
        "claimed": claimed,
        "threshold": threshold,
        "n": interval.n,
    }


def by_seed(frame: pd.DataFrame, column: str) -> dict[int, float]:
    return dict(zip(frame["seed"].fillna(0).astype(int), frame[column].astype(float), strict=True))


def perplexity_claims(runs: pd.DataFrame) -> list[dict]:
    """(1) "comparable to or better than": per table group, Δ val_loss (challenger − baseline) per seed, tested for
    superiority (< 0) and for equivalence within ±``EQUIVALENCE_MARGIN`` (TOST)."""
    rows = []
    for group, runs_of_group in runs[runs["role"] == "table"].groupby("group", sort=False):
        families = {
            family: by_seed(rows_of_family, "val_loss") for family, rows_of_family in runs_of_group.groupby("family")
        }
        for baseline, challenger in FAMILY_PAIRS:
            if not {baseline, challenger} <= set(families):
                continue
            differences = paired_differences(families[challenger], families[baseline])
            better = t_interval(differences)
            names = f"{FAMILY_LABELS[challenger]} − {FAMILY_LABELS[baseline]}"
            ppl = runs_of_group.groupby("family")["val_ppl"].mean()
            evidence = f"mean ppl {ppl[challenger]:.2f} vs {ppl[baseline]:.2f}"
            primary = baseline == "gpt"
            rows.append(
                claim(
                    f"(1) {FAMILY_LABELS[challenger]} better than {FAMILY_LABELS[baseline]}, {group}",
                    "Tables 1-2",
                    better,
                    f"Δ log-ppl ({names}, paired by seed)",
                    evidence,
                    hypothesis=f"(1) better, {group}" if primary else None,
                    claimed="below",
                )
            )
            comparable = Interval(
                better.mean, better.low, better.high, better.n, tost_p(differences, EQUIVALENCE_MARGIN)
            )
            rows.append(
                claim(
                    f"(1) {FAMILY_LABELS[challenger]} comparable to {FAMILY_LABELS[baseline]} "
                    f"(±{EQUIVALENCE_MARGIN:g} nats, TOST), {group}",
                    "Tables 1-2",
                    comparable,
                    f"Δ log-ppl ({names}, paired by seed)",
                    evidence,
                    hypothesis=f"(1) comparable, {group}" if primary else None,
                    claimed="equivalent",
                )
            )
    return rows


def plateaued(path: Path) -> bool:
    """``PLATEAU_EVALUATIONS`` / ``PLATEAU_NATS``: best loss before the last k evaluations − best loss overall."""
    losses = eval_curve(path)["eval_loss"].to_numpy()
    if len(losses) <= PLATEAU_EVALUATIONS:
        return False
    return float(losses[:-PLATEAU_EVALUATIONS].min() - losses.min()) < PLATEAU_NATS


def load_finetunes(paths: list[Path]) -> pd.DataFrame:
    """One row per fine-tune summary, with its over-fitting (final − best validation loss over its curve) and
    whether its curve plateaued."""
    rows = []
    for path in paths:
        summary = read_json(path)
        require_columns(
            summary,
            ["family", "source_dataset", "target_dataset", "method", "num_steps", "source_steps", "seed", "val_loss"],
            path,
            "a fine-tune summary written by the finetune stage",
        )
        rows.append(
            {
                **summary,
                "overfit": summary["val_loss"] - eval_curve(path)["eval_loss"].min(),
                "plateaued": plateaued(path),
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "family",
            "source_dataset",
            "target_dataset",
            "method",
            "num_steps",
            "source_steps",
            "seed",
            "val_loss",
            "val_ppl",
            "overfit",
            "plateaued",
        ],
    )


def finetune_claims(finetunes: pd.DataFrame) -> list[dict]:
    """(2) fine-tunes of the DiffEqFormer resampled to N′ beat the GPT baseline's fine-tune of the same method:
    Δ val_loss < 0 per seed; primary for LoRA at N′ = L/2 and N′ = L, and only when every curve plateaued."""
    rows = []
    for (source, target, method), runs in finetunes.groupby(["source_dataset", "target_dataset", "method"]):
        diffeq = runs["family"].isin(DIFFEQ_FAMILIES)
        baseline = runs[~diffeq]
        for num_steps, ours in runs[diffeq].groupby("num_steps"):
            depth = {ours["source_steps"].iloc[0] / 2: "L/2", ours["source_steps"].iloc[0]: "L"}.get(num_steps)
            flat = int(ours["plateaued"].sum() + baseline["plateaued"].sum())
            total = len(ours) + len(baseline)
            evidence = (
                f"mean ppl {ours['val_ppl'].mean():.2f} vs GPT {baseline['val_ppl'].mean():.2f}; "
                f"{flat} of {total} curves plateaued"
            )
            primary = method == "lora" and depth is not None and flat == total
            rows.append(
                claim(
                    f"(2) {method} DiffEqFormer N′={num_steps} beats GPT, {source}→{target}",
                    "Fig. 5",
                    t_interval(paired_differences(by_seed(ours, "val_loss"), by_seed(baseline, "val_loss"))),
                    "Δ log-ppl (DiffEqFormer − GPT, paired by seed)",
                    evidence,
                    hypothesis=f"(2) {method} N′={depth}" if primary else None,
                    claimed="below",
                )
            )
    return rows


def overfit_claims(finetunes: pd.DataFrame) -> list[dict]:
    """(3) fewer steps over-fit less: per seed, Spearman ρ(N′, final − best validation loss) of the full
    DiffEqFormer fine-tunes into WikiText-103. Over a few N′ ρ takes a few values (±0.5, ±1 for three): no verdict."""
    full = finetunes[
        (finetunes["method"] == "full")
        & finetunes["family"].isin(DIFFEQ_FAMILIES)
        & (finetunes["target_dataset"] == "wt103")
    ]
    rows = []
    for source, runs in full.groupby("source_dataset"):
        rhos = [
            float(seed_runs["num_steps"].corr(seed_runs["overfit"], method="spearman"))
            for _, seed_runs in runs.groupby("seed")
        ]
        rows.append(
            claim(
                f"(3) fewer steps over-fit less on WikiText-103 (full, from {source})",
                "Fig. 5",
                correlation_interval(rhos),
                "Spearman ρ(N′, final − best val_loss) per seed",
                f"ρ over {runs['num_steps'].nunique()} N′ values takes a few values only; largest "
                f"over-fit {runs['overfit'].max():.3g} nats",
            )
        )
    return rows


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


def sharing_claims(runs: pd.DataFrame) -> list[dict]:
    """(5) weight sharing is worse: per seed, the shared model's val_loss − the best other model's, > 0."""
    rows = []
    for group, runs_of_group in runs[runs["role"] == "table"].groupby("group", sort=False):
        wide = runs_of_group.pivot(index="seed", columns="family", values="val_loss")
        others = wide[[family for family in wide.columns if family not in SHARED_FAMILIES]].min(axis=1)
        for family in [family for family in wide.columns if family in SHARED_FAMILIES]:
            ppl = runs_of_group.loc[runs_of_group["family"] == family, "val_ppl"].mean()
            rows.append(
                claim(
                    f"(5) weight sharing is worse: {FAMILY_LABELS[family]}, {group}",
                    "Table 1",
                    t_interval((wide[family] - others).tolist()),
                    "Δ log-ppl (shared − best other, paired by seed)",
                    f"mean ppl {ppl:.2f}",
                    hypothesis="(5) weight sharing is worse",
                    claimed="above",
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
        more, fewer = int((gap > 0).sum()), int((gap < 0).sum())
        sign = binomial_interval(more, more + fewer)
        fraction = binomial_interval(more, len(gap))
        together = binomial_interval(int(constant_clusters(runs, regime).sum()), len(gap))
        rows.append(
            claim(
                f"(6) t⁴ ends with more clusters than the constant a(t): {regime} ({role})",
                "Fig. 2c/d",
                Interval(fraction.mean, fraction.low, fraction.high, fraction.n, sign.p),
                "fraction of seeds clusters(t⁴) > clusters(constant)",
                f"T = {runs['horizon'].iloc[0]:g}, dt = {runs['dt'].iloc[0]:g}; median gap "
                f"{gap.median():g} clusters; sign test {more} vs {fewer} (ties {len(gap) - more - fewer}); "
                f"the constant clusters in {together.mean:.0%} [{together.low:.0%}, {together.high:.0%}]",
                hypothesis="(6) no clustering without weight sharing" if role == "claim" else None,
                claimed="above",
                threshold=0.5,
                status=status[role] or NOT_TESTED,
            )
            | {"direction": (more - fewer) / max(more + fewer, 1)}
        )
    return rows


def throughput_claims(runs: pd.DataFrame) -> list[dict]:
    """(7) training throughput only slightly below GPT's: per seed DiffEqFormer / GPT tokens/s, ≥ 1/1.15. CPU jobs
    on a shared host: reported, no verdict."""
    rows = []
    for group, runs_of_group in runs[runs["role"] == "table"].groupby("group", sort=False):
        families = {
            family: by_seed(rows_of_family, "mean_tokens_per_s")
            for family, rows_of_family in runs_of_group.groupby("family")
        }
        if {"gpt", "diffeq"} <= set(families):
            ratios = [
                families["diffeq"][seed] / families["gpt"][seed]
                for seed in sorted(set(families["diffeq"]) & set(families["gpt"]))
            ]
            rows.append(
                claim(
                    f"(7) throughput only slightly below GPT, {group}",
                    "Fig. 15",
                    t_interval(ratios, 1 / TRAIN_COST_GOAL),
                    "throughput ratio DiffEqFormer / GPT",
                    "tokens/s after the compiling first step on a shared CPU host: no verdict",
                    threshold=1 / TRAIN_COST_GOAL,
                )
            )
    return rows


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
