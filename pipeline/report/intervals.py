"""Intervals, tests and the verdict rule of a claim (docs/experiments.md#verdicts): per-seed means get the 95 %
Student t-interval x̄ ± t₀.₉₇₅,ₙ₋₁·s/√n and the one-sample t-test (paired: per-seed differences); correlations go
through Fisher's z = artanh ρ; 0/1 outcomes get Clopper–Pearson and the exact binomial (sign) test on untied seeds;
lm-eval estimates the z-test; non-inferiority at a margin the one-sided t-test with bound x̄ + t₀.₉₅,ₙ₋₁·s/√n.
n = 1 has no interval and no test; a family's p-values are Holm-adjusted."""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
ALPHA = 1 - CONFIDENCE
"""The family-wise error rate of the primary claims (Holm)."""
FLOAT_TIE = 1e-12
"""Values whose sample standard deviation is below this share of their mean's size are equal (float rounding)."""
SUPPORTED, CONTRADICTED, NON_INFERIOR = "supported", "contradicted", "non-inferior"
INCONCLUSIVE, NOT_TESTED = "inconclusive", "not tested at this scale"
CONTROL, SENSITIVITY = "control (no verdict)", "sensitivity (no verdict)"
SINGLE_RUN = "n = 1: no interval, no verdict"
"""What a claim's row says when its statistic has one value (one seed, or one run per setting)."""
VERDICT_RULE = (
    "Each primary claim is one test (p, two-sided, against the claim's threshold; one-sided against "
    "+margin for a non-inferiority); the family and its m are fixed by the design before the run, a "
    "member that cannot be scored counts with p = 1, and the members' p-values are Holm-adjusted "
    "together (family-wise α = 0.05). supported: adjusted p < α, the statistic on the claimed side and "
    "at least its minimum effect; contradicted: adjusted p < α on the other side; non-inferior: the "
    "one-sided test's adjusted p < α; inconclusive: adjusted p ≥ α, or significant below the minimum "
    "effect; not tested at this scale: the design cannot decide it (too few seeds for 80 % power, "
    "n = 1 or a statistic with too few values). Controls and sensitivity rows carry no verdict."
)
INTERVAL_METHOD = (
    "95 % Student t-interval across seeds (paired per seed where two families are compared); "
    "correlations on Fisher's z; 0/1 outcomes Clopper–Pearson (sign tests on the untied seeds); "
    "non-inferiority: the one-sided 95 % upper bound; n = 1: no interval"
)


@dataclass(frozen=True)
class Interval:
    """Mean of ``n`` values, its two-sided ``CONFIDENCE`` interval [low, high] and the test's p (NaN when n < 2)."""

    mean: float
    low: float
    high: float
    n: int
    p: float = math.nan


def _finite(values: Sequence[float]) -> np.ndarray:
    return np.asarray([value for value in values if math.isfinite(value)], dtype=float)


def t_interval(values: Sequence[float], threshold: float = 0.0) -> Interval:
    """x̄ ± t_{(1+CONFIDENCE)/2, n−1} · s/√n over the finite ``values``; p of the t-test of x̄ = ``threshold``. Values
    all equal (s = 0) have a zero-width interval and the exact sign test's p = 2 · 0.5ⁿ."""
    finite = _finite(values)
    n = len(finite)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    mean = float(finite.mean())
    if n < 2:
        return Interval(mean, math.nan, math.nan, n)
    spread = float(finite.std(ddof=1))
    if spread <= FLOAT_TIE * max(1.0, abs(mean)):
        return Interval(mean, mean, mean, n, float(stats.binomtest(n, n).pvalue) if mean != threshold else 1.0)
    half = float(stats.t.ppf((1 + CONFIDENCE) / 2, n - 1) * spread / math.sqrt(n))
    p = float(stats.ttest_1samp(finite, threshold).pvalue)
    return Interval(mean, mean - half, mean + half, n, p)


def paired_differences(challenger: dict[int, float], baseline: dict[int, float]) -> list[float]:
    """Challenger − baseline over the seeds both have (a seed fixes init, data order, dropout)."""
    return [challenger[seed] - baseline[seed] for seed in sorted(set(challenger) & set(baseline))]


def non_inferiority(values: Sequence[float], margin: float) -> Interval:
    """Δ < +``margin``: the one-sided t-test of x̄ against +margin (p) and its matching bound, high =
    x̄ + t_{CONFIDENCE, n−1} · s/√n (low −∞); n < 2: no bound, no test."""
    finite = _finite(values)
    if len(finite) < 2:
        return Interval(float(finite.mean()) if len(finite) else math.nan, math.nan, math.nan, len(finite))
    mean, error = float(finite.mean()), float(stats.sem(finite))
    high = mean + float(stats.t.ppf(CONFIDENCE, len(finite) - 1)) * error
    p = float(stats.ttest_1samp(finite, margin, alternative="less").pvalue)
    return Interval(mean, -math.inf, high, len(finite), p)


def fisher_z(rhos: Sequence[float], points: int | Sequence[int]) -> np.ndarray:
    """artanh ρ of Spearman correlations over ``points`` values each; |ρ| = 1 becomes the midpoint of 1 and the next
    value such a ρ can take, 1 − 12/(p(p²−1)) (one adjacent swap), i.e. |ρ| = 1 − 6/(p(p²−1)); NaN stays NaN."""
    points = np.asarray(points, dtype=float)
    edge = 1 - 6 / (points * (points**2 - 1))
    return np.arctanh(np.clip(np.asarray(rhos, dtype=float), -edge, edge))


def correlation_interval(z_values: Sequence[float]) -> Interval:
    """Per-seed correlations as Fisher's z (``fisher_z``): the t-interval and p (against ρ = 0) of z, mapped back by
    tanh, so the bounds stay within [−1, 1]."""
    z = t_interval(z_values)
    return Interval(float(np.tanh(z.mean)), float(np.tanh(z.low)), float(np.tanh(z.high)), z.n, z.p)


def binomial_interval(successes: int, trials: int) -> Interval:
    """A fraction of 0/1 outcomes: its Clopper–Pearson interval and the exact two-sided binomial test of 0.5
    (one trial: no interval, no test)."""
    if trials < 2:
        return Interval(successes / trials if trials else math.nan, math.nan, math.nan, trials)
    test = stats.binomtest(int(successes), int(trials), p=0.5)
    ci = test.proportion_ci(confidence_level=CONFIDENCE, method="exact")
    return Interval(successes / trials, float(ci.low), float(ci.high), trials, float(test.pvalue))


@dataclass(frozen=True)
class SignTest:
    """Per-seed differences as signs: ``positive``/``negative``/``ties`` seeds; ``fraction``: the share of the untied
    seeds with a positive difference, its Clopper–Pearson interval and the exact sign test's p (against 0.5)."""

    positive: int
    negative: int
    ties: int
    fraction: Interval


def sign_test(differences: Sequence[float]) -> SignTest:
    """The signs of the finite per-seed ``differences``: the positive share of the untied ones and the sign test."""
    finite = _finite(differences)
    positive, negative = int((finite > 0).sum()), int((finite < 0).sum())
    return SignTest(
        positive, negative, len(finite) - positive - negative, binomial_interval(positive, positive + negative)
    )


def z_test_p(difference: float, stderr: float) -> float:
    """Two-sided p of z = ``difference`` / ``stderr`` (a difference of two estimates with known standard errors);
    no spread (``stderr`` = 0) is p = 1."""
    return 2 * float(stats.norm.sf(abs(difference) / stderr)) if stderr > 0 else 1.0


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of m p-values: the i-th smallest becomes max over j ≤ i of min(1, (m − j + 1)·p_(j));
    a member that could not be scored (NaN) counts in m with p = 1."""
    scored = sorted((p if math.isfinite(p) else 1.0, index) for index, p in enumerate(p_values))
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, (p, index) in enumerate(scored):
        running = max(running, min(1.0, (len(scored) - rank) * p))
        adjusted[index] = running
    return adjusted


def verdict(mean: float, adjusted_p: float, threshold: float, claimed: str) -> str:
    """``VERDICT_RULE`` for a directional claim: ``claimed`` is ``"above"`` or ``"below"`` the threshold."""
    if claimed not in ("above", "below"):
        raise ValueError(f"claimed is {claimed!r}; expected 'above' or 'below'.")
    if not math.isfinite(adjusted_p):
        return NOT_TESTED
    if adjusted_p >= ALPHA or mean == threshold:
        return INCONCLUSIVE
    return SUPPORTED if (mean > threshold) == (claimed == "above") else CONTRADICTED


def non_inferiority_verdict(adjusted_p: float) -> str:
    """``VERDICT_RULE`` for a non-inferiority claim (the one-sided test against +margin)."""
    if not math.isfinite(adjusted_p):
        return NOT_TESTED
    return NON_INFERIOR if adjusted_p < ALPHA else INCONCLUSIVE
