"""Confidence intervals across seeds and the one rule that turns an interval into a claim's verdict.

A statistic measured once per seed (e.g. the per-seed difference of two families' validation losses, both runs
of a seed sharing its data order) has mean x̄ and sample standard deviation s over n seeds; its 95 % Student
t-interval is x̄ ± t₀.₉₇₅,ₙ₋₁ · s/√n. A paired comparison takes the interval of the per-seed differences, which
removes the variation the two runs of a seed share.

When every seed gives the same value (s = 0, as a rank statistic over a few points or a fraction of a few seeds
can), the t-interval has zero width: it carries no spread to test against. The verdict then comes from the exact
two-sided sign test instead: n values on one side of the threshold have p = 2 · 0.5ⁿ, below 1 − ``CONFIDENCE`` only
from n = ``SIGN_TEST_MIN_SEEDS`` seeds on.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
SIGN_TEST_MIN_SEEDS = next(n for n in itertools.count(1) if 2 * 0.5**n < 1 - CONFIDENCE)
"""Fewest seeds whose identical values make the exact two-sided sign test significant (6: 2 · 0.5⁶ = 0.031)."""
FLOAT_TIE = 1e-12
"""Values whose sample standard deviation is below this share of their mean's size are equal (float rounding of one
number computed per seed), and their interval has zero width."""
SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive at this scale"
VERDICT_RULE = ("A claim states that a statistic lies above (or below) a threshold. Verdict from its 95 % "
                "t-interval across seeds: supported when the whole interval lies on the claimed side of the "
                "threshold, contradicted when the whole interval lies on the other side, inconclusive at this scale "
                "when the interval contains the threshold (or fewer than 2 values exist). An interval of zero width "
                "(every seed gave the same value) decides only with the exact sign test, from 6 seeds on.")
INTERVAL_METHOD = "95 % Student t-interval across seeds (paired per seed where two families are compared)"


@dataclass(frozen=True)
class Interval:
    """Mean of ``n`` values and its two-sided ``CONFIDENCE`` t-interval [low, high] (NaN bounds when n < 2)."""

    mean: float
    low: float
    high: float
    n: int

    def __str__(self) -> str:
        return f"{self.mean:.4g} [{self.low:.4g}, {self.high:.4g}] (n={self.n})"


def t_interval(values: Sequence[float]) -> Interval:
    """x̄ ± t_{(1+CONFIDENCE)/2, n−1} · s/√n over the finite ``values``."""
    finite = np.asarray([value for value in values if math.isfinite(value)], dtype=float)
    n = len(finite)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    mean = float(finite.mean())
    if n < 2:
        return Interval(mean, math.nan, math.nan, n)
    spread = float(finite.std(ddof=1))
    if spread <= FLOAT_TIE * max(1.0, abs(mean)):
        spread = 0.0
    half = float(stats.t.ppf((1 + CONFIDENCE) / 2, n - 1) * spread / math.sqrt(n))
    return Interval(mean, mean - half, mean + half, n)


def paired_interval(challenger: dict[int, float], baseline: dict[int, float]) -> Interval:
    """The t-interval of challenger − baseline over the seeds both have (a seed fixes init, data order, dropout)."""
    seeds = sorted(set(challenger) & set(baseline))
    return t_interval([challenger[seed] - baseline[seed] for seed in seeds])


def verdict(interval: Interval, threshold: float, claimed: str) -> str:
    """``VERDICT_RULE``: ``claimed`` is ``"above"`` or ``"below"`` the threshold."""
    if claimed not in ("above", "below"):
        raise ValueError(f"claimed is {claimed!r}; expected 'above' or 'below'.")
    if interval.n < 2 or math.isnan(interval.low):
        return INCONCLUSIVE
    above, below = interval.low > threshold, interval.high < threshold
    if interval.low == interval.high and interval.n < SIGN_TEST_MIN_SEEDS:
        return INCONCLUSIVE
    if above or below:
        return SUPPORTED if above == (claimed == "above") else CONTRADICTED
    return INCONCLUSIVE
