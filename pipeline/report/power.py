"""Power before running (docs/experiments.md, "Power and the family"): the seeds each primary claim needs for 80 %
power at its stated effect size and the Holm-corrected α, from the per-seed spreads of the last mini study.

A paired t-test of n seeds with per-seed sd σ and true effect δ has power P(|T| > t_{1−α/2,n−1}) with T
noncentral t (df n − 1, noncentrality δ√n/σ). The TOST of equivalence within ±m at true difference 0 has power
P(both one-sided tests reject), estimated by simulation (x̄ ~ N(0, σ²/n), s² ~ σ²χ²_{n−1}/(n−1)). The sign test of
n sweep seeds rejects when the exact two-sided binomial p < α; its power is the binomial mass of that region at the
true fraction. Holm's first step tests the smallest p at α/m, so a claim counts as powered when it reaches 80 % at
α/m, m the number of powered primary claims (found by iterating until the family is stable). Claims short of their
seeds are "not tested at this scale" by design.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from pipeline.config import REPO_ROOT
from pipeline.report.intervals import ALPHA, CONFIDENCE

STUDY_CSV = REPO_ROOT / "results" / "benchmarks" / "mini-study-2026-11-25.csv"
"""The planning study: its per-seed perplexities and its claims' 95 % t-intervals over 3 seeds."""
POWER = 0.80
EQUIVALENCE_MARGIN = 0.05
"""Claim (1) 'comparable': |Δ log-ppl| < 0.05 nats (a 5 % perplexity ratio)."""
EFFECT_NATS = 0.10
"""The smallest perplexity gap a directional claim is powered for: 0.10 nats (a 10 % perplexity ratio)."""
EFFECT_RHO = 0.5
"""Claim (4): a mean per-head Spearman ρ(t, largest |λ|) of 0.5."""
EFFECT_FRACTION = 0.75
"""Claim (6): t⁴ ends with more clusters than the constant in 75 % of sweep seeds (null: 50 %)."""
MAX_SEEDS = 1000
SIMULATIONS = 20_000


@dataclass(frozen=True)
class Plan:
    """One primary claim's test: ``test`` is "t", "tost" or "sign"; ``sd`` the per-seed sd (paired difference) it
    is planned with (unused by the sign test) and ``effect`` the effect it must detect (the margin for TOST)."""

    hypothesis: str
    test: str
    sd: float
    effect: float
    sd_source: str


def t_power(n: int, sd: float, effect: float, alpha: float) -> float:
    """Two-sided one-sample (paired) t-test: noncentral-t power P(T > c) + P(T < −c), the lower tail written as
    the upper tail of −T (scipy's nct.cdf far below a large noncentrality is NaN)."""
    df, noncentrality = n - 1, effect / sd * math.sqrt(n)
    critical = stats.t.ppf(1 - alpha / 2, df)
    return float(stats.nct.sf(critical, df, noncentrality) + stats.nct.sf(critical, df, -noncentrality))


def tost_power(n: int, sd: float, margin: float, alpha: float) -> float:
    """TOST at true difference 0, by simulation with a fixed generator."""
    rng = np.random.default_rng(0)
    mean = rng.normal(0.0, sd / math.sqrt(n), SIMULATIONS)
    error = sd * np.sqrt(rng.chisquare(n - 1, SIMULATIONS) / (n - 1)) / math.sqrt(n)
    critical = stats.t.ppf(1 - alpha, n - 1)
    return float(np.mean(((mean + margin) / error > critical) & ((mean - margin) / error < -critical)))


def sign_power(n: int, fraction: float, alpha: float) -> float:
    """Exact two-sided sign test of n seeds (null 0.5): p(k) = min(1, 2·min(F(k), 1 − F(k − 1)))."""
    k = np.arange(n + 1)
    p = np.minimum(1.0, 2 * np.minimum(stats.binom.cdf(k, n, 0.5), stats.binom.sf(k - 1, n, 0.5)))
    return float(stats.binom.pmf(k[p < alpha], n, fraction).sum())


def power(plan: Plan, n: int, alpha: float) -> float:
    if n < 2:
        return 0.0
    if plan.test == "t":
        return t_power(n, plan.sd, plan.effect, alpha)
    if plan.test == "tost":
        return tost_power(n, plan.sd, plan.effect, alpha)
    return sign_power(n, plan.effect, alpha)


def seeds_needed(plan: Plan, alpha: float) -> int:
    """Fewest seeds with ``POWER`` at ``alpha`` (``MAX_SEEDS`` + 1 when none up to it)."""
    return next((n for n in range(2, MAX_SEEDS + 1) if power(plan, n, alpha) >= POWER), MAX_SEEDS + 1)


def powered_family(plans: list[Plan], seeds: dict[str, int]) -> tuple[set[str], float]:
    """The hypotheses whose ``seeds`` reach ``POWER`` at α/m and that α/m, for the smallest m that is at least the
    number of hypotheses powered at α/m (so α/m is never looser than Holm's first step on that family)."""
    for m in range(1, len(plans) + 1):
        alpha = ALPHA / m
        family = {plan.hypothesis for plan in plans if seeds.get(plan.hypothesis, 0) >= seeds_needed(plan, alpha)}
        if len(family) <= m:
            return family, alpha
    return set(), ALPHA / max(len(plans), 1)


def interval_sd(row: pd.Series) -> float:
    """The per-seed sd behind a recorded 95 % t-interval: (high − low)/2 · √n / t_{0.975, n−1}."""
    n = int(row["evidence"].rsplit("n=", 1)[1])
    return float((row["high"] - row["low"]) / 2 * math.sqrt(n) / stats.t.ppf((1 + CONFIDENCE) / 2, n - 1))


def paired_log_ppl_sd(card: pd.DataFrame, group: str) -> float:
    """Per-seed sd of log ppl(DiffEqFormer) − log ppl(GPT) in ``group`` from the recorded per-seed perplexities."""
    ppl = card[card["item"].str.match(rf"{group}-(gpt|diffeq)-s\d+ validation perplexity")].copy()
    ppl[["family", "seed"]] = ppl["item"].str.extract(rf"{group}-(gpt|diffeq)-s(\d+)")
    wide = ppl.pivot(index="seed", columns="family", values="ours").astype(float)
    return float((np.log(wide["diffeq"]) - np.log(wide["gpt"])).std(ddof=1))


def planned_claims(study_csv: Path = STUDY_CSV) -> list[Plan]:
    """The primary claims of the study design with the spreads of ``study_csv`` (docs/experiments.md)."""
    card = pd.read_csv(study_csv)
    if "item" not in card or "evidence" not in card:
        raise ValueError(f"{study_csv} has no item/evidence columns; point it at a mini-study scorecard CSV.")
    claims = card.set_index("item")
    plans = []
    for group in ("owt-small", "wt103-small"):
        sd = paired_log_ppl_sd(card, group)
        source = f"per-seed Δ log-ppl, {group}, {study_csv.name}"
        plans += [
            Plan(f"(1) better, {group}", "t", sd, EFFECT_NATS, source),
            Plan(f"(1) comparable, {group}", "tost", sd, EQUIVALENCE_MARGIN, source),
        ]
    for depth, steps in (("L/2", 2), ("L", 4)):
        item = f"(2) lora DiffEqFormer N′={steps} beats GPT, owt→wt103"
        plans.append(
            Plan(f"(2) lora N′={depth}", "t", interval_sd(claims.loc[item]), EFFECT_NATS, f"95 % interval of '{item}'")
        )
    spectra = [interval_sd(row) for item, row in claims.iterrows() if item.startswith("(4)") and "(trained)" in item]
    plans.append(
        Plan(
            "(4) spectra grow with t",
            "t",
            float(np.mean(spectra)),
            EFFECT_RHO,
            "mean of the 4 trained spectra rows' interval sds (ρ scale)",
        )
    )
    item = "(5) weight sharing is worse: Shared parameter, wt103-small"
    plans.append(
        Plan(
            "(5) weight sharing is worse", "t", interval_sd(claims.loc[item]), EFFECT_NATS, f"95 % interval of '{item}'"
        )
    )
    plans.append(
        Plan(
            "(6) no clustering without weight sharing",
            "sign",
            math.nan,
            EFFECT_FRACTION,
            "sign test on the sweep seeds (no spread needed)",
        )
    )
    return plans


def design_table(seeds: dict[str, int], study_csv: Path = STUDY_CSV) -> pd.DataFrame:
    """Per primary claim: the sd it is planned with, its effect, α after Holm, seeds for 80 % power, seeds in the
    design and whether the design can decide it."""
    plans = planned_claims(study_csv)
    family, alpha = powered_family(plans, seeds)
    return pd.DataFrame(
        [
            {
                "claim": plan.hypothesis,
                "test": plan.test,
                "per-seed sd": plan.sd,
                "effect": plan.effect,
                "alpha (Holm, strictest step)": alpha,
                "seeds for 80 % power": seeds_needed(plan, alpha),
                "seeds in design": seeds.get(plan.hypothesis, 0),
                "verdict by design": "decided" if plan.hypothesis in family else "not tested at this scale",
                "sd from": plan.sd_source,
            }
            for plan in plans
        ]
    )


def preset_seeds(config: dict) -> dict[str, int]:
    """Seeds each primary claim gets in a resolved preset: its ``seeds`` for trained-model claims where the preset
    trains their runs, ``analysis.clustering.seeds`` (the sweep's seeds) for claim (6)."""
    seeds = len(config.get("seeds", [0]))
    groups = config.get("pretrain", {})
    families = {name: set(group["families"]) for name, group in groups.items()}
    finetune = config.get("finetune") or {}
    lora = "lora" in finetune.get("methods", {})
    steps = set(finetune.get("steps_grid", []))
    depth = {group["size"]: config["sizes"][group["size"]]["num_layers"] for group in groups.values()}
    layers = depth.get(finetune.get("diffeq_source"), 0)
    spectra = config.get("analysis", {}).get("spectra", {}).get("runs", [])
    design = {}
    for group in ("owt-small", "wt103-small"):
        if {"gpt", "diffeq"} <= families.get(group, set()):
            design[f"(1) better, {group}"] = design[f"(1) comparable, {group}"] = seeds
    design["(2) lora N′=L/2"] = seeds if lora and layers // 2 in steps else 0
    design["(2) lora N′=L"] = seeds if lora and layers in steps else 0
    design["(4) spectra grow with t"] = min(
        (sum(run.startswith(f"{group}-diffeq-") for run in spectra) for group in groups), default=0
    )
    design["(5) weight sharing is worse"] = seeds if any("shared" in f for f in families.values()) else 0
    design["(6) no clustering without weight sharing"] = int(
        config.get("analysis", {}).get("clustering", {}).get("seeds", 0)
    )
    return design
