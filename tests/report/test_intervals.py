"""Intervals, tests and the verdict rule, on synthetic numbers with known answers."""

import math

import numpy as np
import pytest

from pipeline.report.intervals import (
    CONTRADICTED,
    EQUIVALENT,
    INCONCLUSIVE,
    NOT_TESTED,
    SUPPORTED,
    binomial_interval,
    correlation_interval,
    equivalence_verdict,
    holm,
    paired_interval,
    sign_test,
    t_interval,
    tost_p,
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
    interval = paired_interval(challenger, baseline)
    assert verdict(interval.mean, interval.p, 0.0, "below") == expected


def test_pairing_by_seed_removes_the_shared_seed_effect():
    """The same numbers unpaired: the seed effect swamps a clear win."""
    rng = np.random.default_rng(1)
    effect = rng.normal(0, 1.0, size=5)
    baseline, challenger = 4.0 + effect, 3.5 + effect + rng.normal(0, 0.05, size=5)
    assert t_interval(list(challenger)).high > t_interval(list(baseline)).low  # intervals overlap
    interval = paired_interval(dict(enumerate(challenger)), dict(enumerate(baseline)))
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


def test_equivalence_within_the_margin_is_equivalent_and_outside_it_is_not():
    """Per-seed Δ log-ppl scattered around 0 (sd 0.01, 10 seeds) lie within ±0.05 nats: TOST decides
    'equivalent'; the same spread around 0.08 does not."""
    rng = np.random.default_rng(2)
    near_zero = rng.normal(0.0, 0.01, size=10)
    assert equivalence_verdict(tost_p(near_zero, 0.05)) == EQUIVALENT
    assert equivalence_verdict(tost_p(near_zero + 0.08, 0.05)) == INCONCLUSIVE
    assert equivalence_verdict(tost_p([0.0], 0.05)) == NOT_TESTED


def test_a_zero_one_outcome_gets_a_binomial_interval_inside_zero_one():
    """1 success in 20 seeds: Clopper–Pearson [0.0013, 0.2487] (a t-interval would go below 0)."""
    interval = binomial_interval(1, 20)
    assert interval.mean == 0.05
    assert interval.low == pytest.approx(0.00127, abs=1e-4) and interval.high == pytest.approx(0.2487, abs=1e-4)
    assert t_interval([1.0] + [0.0] * 19).low < 0 <= interval.low
    assert binomial_interval(19, 20).p == pytest.approx(4.0e-5, rel=0.01)


def test_a_correlation_interval_stays_within_minus_one_and_one():
    """Per-seed ρ 0.9, 0.2, 0.95: the t-interval of ρ passes 1; Fisher's z keeps it inside."""
    rhos = [0.9, 0.2, 0.95]
    assert t_interval(rhos).high > 1
    interval = correlation_interval(rhos)
    assert -1 <= interval.low < interval.mean < interval.high <= 1


def test_equal_values_decide_only_by_the_sign_test():
    """Three seeds all at ρ = 0.5: zero width, sign-test p = 2 · 0.5³ = 0.25; six equal values: p = 0.031."""
    assert t_interval([0.5] * 3).p == pytest.approx(0.25)
    assert t_interval([0.5] * 6).p == pytest.approx(0.03125)


def test_a_sign_test_drops_ties_from_its_p_but_not_from_the_share_of_positive_seeds():
    signs = sign_test([3.0, 2.0, 1.0, 0.0, 0.0, -1.0, math.nan])
    assert (signs.positive, signs.negative, signs.ties) == (3, 1, 2)
    # share: 3 of the 6 finite seeds; p: 3 of 4 untied, two-sided exact binomial = 2 · (1 + 4) / 16 = 0.625
    assert signs.fraction.mean == 0.5 and signs.fraction.n == 6
    assert signs.fraction.p == pytest.approx(0.625)
    assert signs.balance == 0.5
    assert sign_test([0.0, 0.0]).balance == 0.0


def test_a_z_test_of_two_standard_errors_apart_and_of_no_spread():
    assert z_test_p(2 * 1.959964, 2.0) == pytest.approx(0.05, rel=1e-5)
    assert z_test_p(1.0, 0.0) == 1.0
