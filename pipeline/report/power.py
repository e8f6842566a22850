"""Power before running (docs/experiments.md#power-and-the-family): the seeds each primary claim of a preset needs
for 80 % power at its effect and Holm's α/m, from per-seed spreads of a recorded study's scorecard CSV.

Paired t-test: P(|T| > t_{1−α/2,n−1}), T noncentral t (df n − 1, noncentrality δ√n/σ); non-inferiority at margin
M: P(T > t_{1−α,n−1}), noncentrality M√n/σ; a fraction of seeds: the exact binomial mass of the rejection region at
the minimum effect, and at least the seeds a Clopper–Pearson half-width of ``FRACTION_HALF_WIDTH`` needs. m is the
number of powered claims, iterated until stable."""

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from pipeline.config import REPO_ROOT
from pipeline.report.intervals import ALPHA, CONFIDENCE

STUDY_CSV = REPO_ROOT / "results" / "benchmarks" / "mini-study-2026-11-27.csv"
"""The planning study: per-seed perplexities of the OpenWebText stand-in and its claims' 95 % t-intervals (6 seeds)."""
POWER = 0.80
NON_INFERIORITY_MARGIN = 0.05
"""Claim (1) "comparable to or better than" (the abstract) as non-inferiority: Δ log-ppl < +0.05 nats (5 %)."""
EFFECT_NATS = 0.10
"""The smallest perplexity gap a directional claim is powered for: 0.10 nats (a 10 % perplexity ratio)."""
EFFECT_RHO = 0.5
"""Claim (4): a mean per-head Spearman ρ(t, largest |λ|) of 0.5."""
EFFECT_FRACTION = 0.75
"""Claim (6)'s parts: the minimum effect, 75 % of sweep seeds (null: 50 %); a significant fraction below it is
inconclusive."""
FRACTION_HALF_WIDTH = 0.07
"""Claim (6)'s sweep seeds: enough for a 95 % Clopper–Pearson half-width ≤ 0.07 at a fraction of 50 % (208)."""
CLUSTERING_PARTS = (
    "(6a) the constant a(t) clusters",
    "(6b) a(t) = 0.5·(t/T)^4 does not cluster",
    "(6c) clusters grow with the degree k",
)
MAX_SEEDS = 1000


@dataclass(frozen=True)
class Plan:
    """One primary claim's test: ``test`` is "t", "non-inferiority" or "sign"; ``sd`` the per-seed sd (paired
    difference) it is planned with, measured over ``sd_seeds`` seeds (unused by the sign test), ``effect`` the
    effect it must detect (the margin for non-inferiority, the minimum fraction for the sign test), and
    ``design_seeds`` the seeds the preset gives it."""

    hypothesis: str
    test: str
    sd: float
    effect: float
    sd_source: str
    sd_seeds: int
    design_seeds: int


def power(plan: Plan, n: int, alpha: float) -> float:
    """Power of ``plan``'s test at ``n`` seeds and ``alpha``. ``t``: the two-sided one-sample (paired) t-test,
    noncentral-t P(T > c) + P(T < −c), the lower tail written as the upper tail of −T (scipy's nct.cdf far below a
    large noncentrality is NaN). ``non-inferiority``: the one-sided t-test of Δ < +margin at a true Δ of 0,
    P(T > t_{1−α, n−1}), noncentrality margin·√n/σ. ``sign``: the exact two-sided sign test (null 0.5), p(k) =
    min(1, 2·min(F(k), 1 − F(k − 1))), at a true fraction of ``effect``."""
    if n < 2:
        return 0.0
    if plan.test in ("t", "non-inferiority"):
        df, noncentrality = n - 1, plan.effect / plan.sd * math.sqrt(n)
        if plan.test == "non-inferiority":
            return float(stats.nct.sf(stats.t.ppf(1 - alpha, df), df, noncentrality))
        critical = stats.t.ppf(1 - alpha / 2, df)
        return float(stats.nct.sf(critical, df, noncentrality) + stats.nct.sf(critical, df, -noncentrality))
    k = np.arange(n + 1)
    p = np.minimum(1.0, 2 * np.minimum(stats.binom.cdf(k, n, 0.5), stats.binom.sf(k - 1, n, 0.5)))
    return float(stats.binom.pmf(k[p < alpha], n, plan.effect).sum())


def precision_seeds() -> int:
    """Fewest seeds whose 95 % Clopper–Pearson interval at k = ⌊n/2⌋ successes is at most ±``FRACTION_HALF_WIDTH``
    around k/n: bounds Beta⁻¹(α/2; k, n − k + 1) and Beta⁻¹(1 − α/2; k + 1, n − k)."""
    n = np.arange(2, MAX_SEEDS + 1)
    k = n // 2
    low = stats.beta.ppf((1 - CONFIDENCE) / 2, k, n - k + 1)
    high = stats.beta.ppf((1 + CONFIDENCE) / 2, k + 1, n - k)
    return int(n[np.argmax(np.maximum(k / n - low, high - k / n) <= FRACTION_HALF_WIDTH)])


def seeds_needed(plan: Plan, alpha: float) -> int:
    """Fewest seeds with ``POWER`` at ``alpha`` (``MAX_SEEDS`` + 1 when none up to it, or when the plan has no
    spread); a sign test needs at least ``precision_seeds``."""
    if plan.test != "sign" and not math.isfinite(plan.sd):
        return MAX_SEEDS + 1
    needed = next((n for n in range(2, MAX_SEEDS + 1) if power(plan, n, alpha) >= POWER), MAX_SEEDS + 1)
    return max(needed, precision_seeds()) if plan.test == "sign" else needed


def powered_family(plans: list[Plan]) -> tuple[set[str], float]:
    """The hypotheses whose ``design_seeds`` reach ``POWER`` at α/m and that α/m, for the smallest m that is at least
    the number of hypotheses powered at α/m (so α/m is never looser than Holm's first step on that family)."""
    for m in range(1, len(plans) + 1):
        alpha = ALPHA / m
        family = {plan.hypothesis for plan in plans if plan.design_seeds >= seeds_needed(plan, alpha)}
        if len(family) <= m:
            return family, alpha
    return set(), ALPHA / max(len(plans), 1)


def interval_sd(row: pd.Series) -> tuple[float, int]:
    """The per-seed sd behind a recorded 95 % t-interval, (high − low)/2 · √n / t_{0.975, n−1}, and its n."""
    n = int(re.findall(r"n=(\d+)", row["evidence"])[-1])
    return float((row["high"] - row["low"]) / 2 * math.sqrt(n) / stats.t.ppf((1 + CONFIDENCE) / 2, n - 1)), n


def per_seed_log_ppl(card: pd.DataFrame, group: str) -> pd.DataFrame:
    """Recorded per-seed log perplexity of ``group``, seed × family (empty when the study did not run it)."""
    ppl = card[card["item"].str.match(rf"{group}-\w+-s\d+ validation perplexity")].copy()
    ppl[["family", "seed"]] = ppl["item"].str.extract(rf"{group}-(\w+)-s(\d+)")
    return np.log(ppl.pivot(index="seed", columns="family", values="ours").astype(float))


def spread(differences: pd.Series, source: str) -> tuple[float, str, int]:
    """sd of per-seed ``differences`` with its source, seeds and df (NaN with fewer than 2 seeds)."""
    n = int(differences.notna().sum())
    sd = float(differences.std(ddof=1)) if n > 1 else math.nan
    return sd, f"{source} ({n} seeds, df {n - 1})" if n > 1 else f"{source}: no recorded spread", n


def lora_hypotheses(config: dict) -> dict[str, tuple[str, int]]:
    """Claim (2)'s primary hypotheses in ``config``: per fine-tune direction, LoRA at N′ = L/2 and N′ = L (L the
    DiffEqFormer source's steps), each with its scorecard row's item and its N′."""
    finetune = config.get("finetune") or {}
    hypotheses = {}
    for source, target in finetune.get("directions", []) if "lora" in finetune.get("methods", {}) else []:
        size = config["pretrain"][f"{source}-{finetune['diffeq_source']}"]["size"]
        layers = config["sizes"][size]["num_layers"]
        for depth, steps in (("L/2", layers // 2), ("L", layers)):
            item = f"(2) lora DiffEqFormer N′={steps} beats GPT, {source}→{target}"
            hypotheses[f"(2) lora N′={depth}, {source}→{target}"] = (item, steps)
    return hypotheses


def planned_claims(config: dict, study_csv: Path = STUDY_CSV) -> list[Plan]:
    """The primary claims of ``config``'s design, each planned with the spread ``study_csv`` recorded on the same
    stand-in (table group, fine-tune direction) the preset runs (docs/experiments.md, "Power and the family"), with
    its seeds in the design: the preset's ``seeds`` for trained-model claims where the preset trains their runs (the
    spectra: the group with the fewest spectra runs), ``analysis.clustering.seeds`` (the sweep's) for claim (6)'s."""
    card = pd.read_csv(study_csv)
    if "item" not in card or "evidence" not in card:
        raise ValueError(f"{study_csv} has no item/evidence columns; point --study-csv at a mini-study scorecard CSV.")
    claims = card.set_index("item")
    seeds = len(config.get("seeds", [0]))
    groups = config.get("pretrain", {})
    plans = []
    for group, families in ((name, set(g["families"])) for name, g in groups.items()):
        wide = per_seed_log_ppl(card, group)
        if {"gpt", "diffeq"} <= families:
            pair = wide["diffeq"] - wide["gpt"] if {"gpt", "diffeq"} <= set(wide) else pd.Series(dtype=float)
            sd, source, n = spread(pair, f"per-seed Δ log-ppl, {group}, {study_csv.name}")
            plans += [
                Plan(f"(1) better, {group}", "t", sd, EFFECT_NATS, source, n, seeds),
                Plan(f"(1) non-inferior, {group}", "non-inferiority", sd, NON_INFERIORITY_MARGIN, source, n, seeds),
            ]
        if "shared" in families:
            others = wide.drop(columns="shared", errors="ignore").min(axis=1)
            gap = wide["shared"] - others if "shared" in wide else pd.Series(dtype=float)
            sd, source, n = spread(gap, f"per-seed Δ log-ppl shared − best other, {group}, {study_csv.name}")
            plans.append(Plan(f"(5) weight sharing is worse, {group}", "t", sd, EFFECT_NATS, source, n, seeds))
    steps_grid = (config.get("finetune") or {}).get("steps_grid", [])
    for hypothesis, (item, steps) in lora_hypotheses(config).items():
        sd, n = interval_sd(claims.loc[item]) if item in claims.index else (math.nan, 0)
        source = f"95 % interval of '{item}' ({n} seeds, df {n - 1})" if n else f"'{item}': no recorded spread"
        plans.append(Plan(hypothesis, "t", sd, EFFECT_NATS, source, n, seeds if steps in steps_grid else 0))
    spectra = [interval_sd(row) for item, row in claims.iterrows() if re.match(r"\(4\) \w+ spectrum grows", item)]
    n = min((n for _, n in spectra), default=0)
    sd = float(np.mean([sd for sd, _ in spectra])) if spectra else math.nan
    source = f"mean of {len(spectra)} trained spectra rows' interval sds (ρ scale, {n} seeds each), {study_csv.name}"
    runs = config.get("analysis", {}).get("spectra", {}).get("runs", [])
    design = min((sum(run.startswith(f"{group}-diffeq-") for run in runs) for group in groups), default=0)
    plans.append(Plan("(4) spectra grow with t", "t", sd, EFFECT_RHO, source, n, design))
    sweep = int(config.get("analysis", {}).get("clustering", {}).get("seeds", 0))
    source = "fraction of sweep seeds (no spread)"
    return plans + [Plan(part, "sign", math.nan, EFFECT_FRACTION, source, 0, sweep) for part in CLUSTERING_PARTS]


def design_table(config: dict, study_csv: Path = STUDY_CSV) -> pd.DataFrame:
    """Per primary claim: the sd it is planned with (and its seeds), its effect, α after Holm, seeds for 80 % power,
    seeds in the design and whether the design can decide it."""
    plans = planned_claims(config, study_csv)
    family, alpha = powered_family(plans)
    return pd.DataFrame(
        [
            {
                "claim": plan.hypothesis,
                "test": plan.test,
                "per-seed sd": plan.sd,
                "effect": plan.effect,
                "alpha (Holm, strictest step)": alpha,
                "seeds for 80 % power": seeds_needed(plan, alpha),
                "seeds in design": plan.design_seeds,
                "verdict by design": "decided" if plan.hypothesis in family else "not tested at this scale",
                "sd from": plan.sd_source,
            }
            for plan in plans
        ]
    )
