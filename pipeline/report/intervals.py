"""Intervals, tests and the verdict rule of a claim (docs/experiments.md, "Verdicts").

A statistic measured once per seed has mean x̄ and sample sd s over n seeds; its 95 % Student t-interval is
x̄ ± t₀.₉₇₅,ₙ₋₁ · s/√n and its two-sided p the one-sample t-test of x̄ against the claim's threshold. A paired
comparison uses the per-seed differences. Correlations are averaged and tested on Fisher's z = artanh ρ, so their
interval stays within [−1, 1]. A 0/1 outcome per seed gets the Clopper–Pearson interval and the exact binomial
(sign) test; a per-seed difference's signs the sign test (ties dropped). Two estimates with known standard errors
(lm-eval's) are compared by the z-test. Equivalence within ±margin is the two one-sided t-tests (TOST): p = the larger
of the two p-values.
With n = 1 there is no interval and no test. P-values of one family are adjusted by Holm's step-down method.
"""

from __future__ import annotations

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
CORRELATION_CLIP = 1 - 1e-9
"""|ρ| = 1 is clipped to this before artanh (finite z)."""
SUPPORTED, CONTRADICTED, EQUIVALENT = "supported", "contradicted", "equivalent"
INCONCLUSIVE, NOT_TESTED = "inconclusive", "not tested at this scale"
CONTROL, SENSITIVITY = "control (no verdict)", "sensitivity (no verdict)"
SINGLE_RUN = "n = 1: no interval, no verdict"
"""What a claim's row says when its statistic has one value (one seed, or one run per setting)."""
VERDICT_RULE = (
    "Each primary claim is one test (p, two-sided, against the claim's threshold; TOST for an "
    "equivalence); p-values of the primary claims are Holm-adjusted together (family-wise α = 0.05). "
    "supported: adjusted p < α and the statistic on the claimed side; contradicted: adjusted p < α on "
    "the other side; equivalent: the TOST's adjusted p < α; inconclusive: adjusted p ≥ α; not tested "
    "at this scale: the design cannot decide it (too few seeds for 80 % power, n = 1, a statistic with "
    "too few values, or a fine-tune whose curve did not plateau). Controls and sensitivity rows carry "
    "no verdict."
)
INTERVAL_METHOD = (
    "95 % Student t-interval across seeds (paired per seed where two families are compared); "
    "correlations on Fisher's z; 0/1 outcomes Clopper–Pearson; n = 1: no interval"
)


@dataclass(frozen=True)
class Interval:
    """Mean of ``n`` values, its two-sided ``CONFIDENCE`` interval [low, high] and the test's p (NaN when n < 2)."""

    mean: float
    low: float
    high: float
    n: int
    p: float = math.nan

    def __str__(self) -> str:
        return f"{self.mean:.4g} [{self.low:.4g}, {self.high:.4g}] (n={self.n}, p={self.p:.3g})"


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


def paired_interval(challenger: dict[int, float], baseline: dict[int, float]) -> Interval:
    """The t-interval of challenger − baseline over the seeds both have (a seed fixes init, data order, dropout)."""
    return t_interval(paired_differences(challenger, baseline))


def paired_differences(challenger: dict[int, float], baseline: dict[int, float]) -> list[float]:
    return [challenger[seed] - baseline[seed] for seed in sorted(set(challenger) & set(baseline))]


def tost_p(values: Sequence[float], margin: float) -> float:
    """Equivalence of the mean to 0 within ±``margin``: max of the one-sided t-tests of x̄ > −margin and
    x̄ < +margin (NaN when n < 2)."""
    finite = _finite(values)
    if len(finite) < 2:
        return math.nan
    lower = stats.ttest_1samp(finite, -margin, alternative="greater").pvalue
    upper = stats.ttest_1samp(finite, margin, alternative="less").pvalue
    return float(max(lower, upper))


def correlation_interval(rhos: Sequence[float]) -> Interval:
    """Per-seed correlations averaged on Fisher's z = artanh ρ: the t-interval and p (against ρ = 0) of z, mapped
    back by tanh, so the bounds stay within [−1, 1]."""
    finite = _finite(rhos)
    z = t_interval(np.arctanh(np.clip(finite, -CORRELATION_CLIP, CORRELATION_CLIP)).tolist())
    return Interval(float(np.tanh(z.mean)), float(np.tanh(z.low)), float(np.tanh(z.high)), z.n, z.p)


def binomial_interval(successes: int, trials: int, null: float = 0.5) -> Interval:
    """A fraction of 0/1 outcomes: its Clopper–Pearson interval and the exact two-sided binomial test of ``null``."""
    if trials == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    test = stats.binomtest(int(successes), int(trials), null)
    ci = test.proportion_ci(confidence_level=CONFIDENCE, method="exact")
    return Interval(successes / trials, float(ci.low), float(ci.high), trials, float(test.pvalue))


@dataclass(frozen=True)
class SignTest:
    """Per-seed differences as signs: ``positive``/``negative``/``ties`` seeds; ``fraction``: the share of all seeds
    with a positive difference (Clopper–Pearson) carrying the exact sign test's p (ties dropped, against 0.5)."""

    positive: int
    negative: int
    ties: int
    fraction: Interval

    @property
    def balance(self) -> float:
        """(positive − negative) / untied seeds: the side the sign test points to (0 when every seed ties)."""
        return (self.positive - self.negative) / max(self.positive + self.negative, 1)


def sign_test(differences: Sequence[float]) -> SignTest:
    """The signs of the finite per-seed ``differences``: their positive share and the exact sign test."""
    finite = _finite(differences)
    positive, negative = int((finite > 0).sum()), int((finite < 0).sum())
    share = binomial_interval(positive, len(finite))
    test = binomial_interval(positive, positive + negative)
    return SignTest(
        positive,
        negative,
        len(finite) - positive - negative,
        Interval(share.mean, share.low, share.high, share.n, test.p),
    )


def z_test_p(difference: float, stderr: float) -> float:
    """Two-sided p of z = ``difference`` / ``stderr`` (a difference of two estimates with known standard errors);
    no spread (``stderr`` = 0) is p = 1."""
    return 2 * float(stats.norm.sf(abs(difference) / stderr)) if stderr > 0 else 1.0


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of m p-values: the i-th smallest becomes max over j ≤ i of min(1, (m − j + 1)·p_(j));
    NaN entries stay NaN and do not count in m."""
    finite = [(p, index) for index, p in enumerate(p_values) if math.isfinite(p)]
    adjusted = [math.nan] * len(p_values)
    running = 0.0
    for rank, (p, index) in enumerate(sorted(finite)):
        running = max(running, min(1.0, (len(finite) - rank) * p))
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


def equivalence_verdict(adjusted_p: float) -> str:
    """``VERDICT_RULE`` for an equivalence claim tested by TOST."""
    if not math.isfinite(adjusted_p):
        return NOT_TESTED
    return EQUIVALENT if adjusted_p < ALPHA else INCONCLUSIVE
