"""Intervals, tests and the verdict rule, on synthetic numbers with known answers."""

import math

import numpy as np
import pytest
from scipy import stats

from pipeline.report.intervals import (
    CONTRADICTED,
    INCONCLUSIVE,
    NON_INFERIOR,
    NOT_TESTED,
    SUPPORTED,
    binomial_interval,
    correlation_interval,
    fisher_z,
    holm,
    non_inferiority,
    non_inferiority_verdict,
    paired_differences,
    sign_test,
    t_interval,
    verdict,
    z_test_p,
)


def test_t_interval_of_known_values():
    interval = t_interval([1.0, 2.0, 3.0])
    # mean 2, s = 1, t(0.975, 2) = 4.302653; t = 2·√3 = 3.464 on 2 df: p = 0.0742
    assert interval.mean == 2.0 and interval.n == 3
    assert interval.low == pytest.approx(2 - 4.302653 / math.sqrt(3), rel=1e-6)
    assert interval.high == pytest.approx(2 + 4.302653 / math.sqrt(3), rel=1e-6)
    assert interval.p == pytest.approx(0.0742, abs=1e-4)


@pytest.mark.parametrize(("offset", "expected"), [(-0.5, SUPPORTED), (0.5, CONTRADICTED), (0.0, INCONCLUSIVE)])
def test_a_clear_win_a_clear_loss_and_a_tie_inside_the_noise(offset, expected):
    """Per-seed losses share a large seed effect (paired by seed) plus small noise; the challenger is claimed to
    have the lower loss: a clear win is supported, a clear loss contradicted, a tie inconclusive."""
    rng = np.random.default_rng(0)
    seed_effect = rng.normal(0, 1.0, size=5)
    baseline = {seed: 4.0 + effect + rng.normal(0, 0.02) for seed, effect in enumerate(seed_effect)}
    challenger = {seed: 4.0 + effect + offset + rng.normal(0, 0.02) for seed, effect in enumerate(seed_effect)}
    interval = t_interval(paired_differences(challenger, baseline))
    assert verdict(interval.mean, interval.p, 0.0, "below") == expected


def test_pairing_by_seed_removes_the_shared_seed_effect():
    """The same numbers unpaired: the seed effect swamps a clear win."""
    rng = np.random.default_rng(1)
    effect = rng.normal(0, 1.0, size=5)
    baseline, challenger = 4.0 + effect, 3.5 + effect + rng.normal(0, 0.05, size=5)
    assert t_interval(list(challenger)).high > t_interval(list(baseline)).low  # intervals overlap
    interval = t_interval(paired_differences(dict(enumerate(challenger)), dict(enumerate(baseline))))
    assert verdict(interval.mean, interval.p, 0.0, "below") == SUPPORTED


def test_one_seed_has_no_interval_and_no_verdict():
    single = t_interval([0.9])
    assert single.n == 1 and math.isnan(single.low) and math.isnan(single.high) and math.isnan(single.p)
    assert verdict(single.mean, single.p, 0.0, "above") == NOT_TESTED


def test_holm_turns_a_lone_p_of_three_percent_among_five_claims_into_inconclusive():
    """Alone, p = 0.03 < 0.05 supports; among five claims its Holm-adjusted p is 5 · 0.03 = 0.15."""
    assert verdict(0.2, 0.03, 0.0, "above") == SUPPORTED
    adjusted = holm([0.6, 0.03, 0.4, 0.9, 0.7])
    assert adjusted[1] == pytest.approx(0.15)
    assert verdict(0.2, adjusted[1], 0.0, "above") == INCONCLUSIVE
    assert adjusted == pytest.approx([1.0, 0.15, 1.0, 1.0, 1.0])  # (m − rank)·p, capped at 1, monotone


def test_a_member_that_could_not_be_scored_keeps_its_place_in_holms_family():
    """A family of 4 whose second member was not scored: p = 0.014 is above α/4 = 0.0125, so its adjusted p is
    4 · 0.014 = 0.056 (inconclusive); dropping the member (m = 3) would have made it 0.042, supported."""
    adjusted = holm([0.014, math.nan, 0.5, 0.6])
    assert adjusted == pytest.approx([0.056, 1.0, 1.0, 1.0])
    assert verdict(0.2, adjusted[0], 0.0, "above") == INCONCLUSIVE
    assert holm([0.014, 0.5, 0.6])[0] == pytest.approx(0.042)


def per_seed(mean: float, upper_bound: float, n: int = 10) -> np.ndarray:
    """n values with ``mean`` whose one-sided 95 % upper bound x̄ + t₀.₉₅,ₙ₋₁ · s/√n is ``upper_bound``."""
    shape = np.random.default_rng(2).normal(size=n)
    shape = (shape - shape.mean()) / shape.std(ddof=1)
    return mean + shape * (upper_bound - mean) * math.sqrt(n) / stats.t.ppf(0.95, n - 1)


@pytest.mark.parametrize(("upper_bound", "expected"), [(0.04, NON_INFERIOR), (0.06, INCONCLUSIVE)])
def test_non_inferiority_reads_the_one_sided_bound_against_the_margin(upper_bound, expected):
    """Δ = +0.02 nats: an upper 95 % bound of 0.04 < 0.05 is non-inferior; a bound of 0.06 is inconclusive."""
    interval = non_inferiority(per_seed(0.02, upper_bound), 0.05)
    assert interval.mean == pytest.approx(0.02) and interval.high == pytest.approx(upper_bound)
    assert interval.low == -math.inf and (interval.p < 0.05) == (upper_bound < 0.05)
    assert non_inferiority_verdict(interval.p) == expected
    assert non_inferiority_verdict(non_inferiority([0.0], 0.05).p) == NOT_TESTED


def test_a_zero_one_outcome_gets_a_binomial_interval_inside_zero_one():
    """1 success in 20 seeds: Clopper–Pearson [0.0013, 0.2487] (a t-interval would go below 0)."""
    interval = binomial_interval(1, 20)
    assert interval.mean == 0.05
    assert interval.low == pytest.approx(0.00127, abs=1e-4) and interval.high == pytest.approx(0.2487, abs=1e-4)
    assert t_interval([1.0] + [0.0] * 19).low < 0 <= interval.low
    assert binomial_interval(19, 20).p == pytest.approx(4.0e-5, rel=0.01)
    single = binomial_interval(1, 1)
    assert single.n == 1 and math.isnan(single.low) and math.isnan(single.high) and math.isnan(single.p)


def test_a_correlation_interval_stays_within_minus_one_and_one():
    """Per-seed ρ 0.9, 0.2, 0.95: the t-interval of ρ passes 1; Fisher's z keeps it inside."""
    rhos = [0.9, 0.2, 0.95]
    assert t_interval(rhos).high > 1
    interval = correlation_interval(fisher_z(rhos, 10))
    assert -1 <= interval.low < interval.mean < interval.high <= 1


def test_a_perfect_spearman_is_half_a_step_of_its_grid_not_a_clip_at_ten():
    """ρ = ±1 over 4 points: |ρ| becomes 1 − 6/60 = 0.9 (between 1 and the next attainable 0.8), z = artanh 0.9 =
    1.472, where clipping at 1 − 1e-9 gave 10.7; over 10 points the edge is 1 − 6/990."""
    np.testing.assert_allclose(fisher_z([1.0, -1.0, 0.5], 4), [1.47222, -1.47222, np.arctanh(0.5)], rtol=1e-5)
    assert fisher_z([1.0], 10)[0] == pytest.approx(np.arctanh(1 - 6 / 990))
    assert math.isnan(fisher_z([math.nan], 4)[0])


def test_equal_values_decide_only_by_the_sign_test():
    """Three seeds all at ρ = 0.5: zero width, sign-test p = 2 · 0.5³ = 0.25; six equal values: p = 0.031."""
    assert t_interval([0.5] * 3).p == pytest.approx(0.25)
    assert t_interval([0.5] * 6).p == pytest.approx(0.03125)


def test_a_sign_test_leaves_ties_out_of_its_fraction_its_interval_and_its_p():
    signs = sign_test([3.0, 2.0, 1.0, 0.0, 0.0, -1.0, math.nan])
    assert (signs.positive, signs.negative, signs.ties) == (3, 1, 2)
    # 3 of the 4 untied seeds; p: two-sided exact binomial = 2 · (1 + 4) / 16 = 0.625; interval of 3 in 4
    assert signs.fraction.mean == 0.75 and signs.fraction.n == 4
    assert signs.fraction.p == pytest.approx(0.625)
    assert (signs.fraction.low, signs.fraction.high) == (binomial_interval(3, 4).low, binomial_interval(3, 4).high)
    assert sign_test([0.0, 0.0]).fraction.n == 0


def test_a_z_test_of_two_standard_errors_apart_and_of_no_spread():
    assert z_test_p(2 * 1.959964, 2.0) == pytest.approx(0.05, rel=1e-5)
    assert z_test_p(1.0, 0.0) == 1.0
