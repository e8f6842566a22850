"""Intervals across seeds and the verdict rule, on synthetic numbers with known answers."""

import math

import numpy as np
import pytest

from pipeline.report.intervals import (
    CONTRADICTED,
    INCONCLUSIVE,
    SUPPORTED,
    paired_interval,
    t_interval,
    verdict,
)


def test_t_interval_of_known_values():
    interval = t_interval([1.0, 2.0, 3.0])
    # mean 2, s = 1, t(0.975, 2) = 4.302653
    assert interval.mean == 2.0 and interval.n == 3
    assert interval.low == pytest.approx(2 - 4.302653 / math.sqrt(3), rel=1e-6)
    assert interval.high == pytest.approx(2 + 4.302653 / math.sqrt(3), rel=1e-6)


@pytest.mark.parametrize(("offset", "expected"), [(-0.5, SUPPORTED), (0.5, CONTRADICTED), (0.0, INCONCLUSIVE)])
def test_a_clear_win_a_clear_loss_and_a_tie_inside_the_noise(offset, expected):
    """Per-seed losses share a large seed effect (paired by seed) plus small noise; the challenger is claimed to
    have the lower loss: a clear win is supported, a clear loss contradicted, a tie inconclusive."""
    rng = np.random.default_rng(0)
    seed_effect = rng.normal(0, 1.0, size=5)
    baseline = {seed: 4.0 + effect + rng.normal(0, 0.02) for seed, effect in enumerate(seed_effect)}
    challenger = {seed: 4.0 + effect + offset + rng.normal(0, 0.02) for seed, effect in enumerate(seed_effect)}
    assert verdict(paired_interval(challenger, baseline), 0.0, "below") == expected


def test_pairing_by_seed_removes_the_shared_seed_effect():
    """The same numbers unpaired: the seed effect swamps a clear win."""
    rng = np.random.default_rng(1)
    effect = rng.normal(0, 1.0, size=5)
    baseline, challenger = 4.0 + effect, 3.5 + effect + rng.normal(0, 0.05, size=5)
    unpaired = t_interval(list(challenger)).mean - t_interval(list(baseline)).mean
    assert unpaired == pytest.approx(-0.5, abs=0.05)
    assert t_interval(list(challenger)).high > t_interval(list(baseline)).low  # intervals overlap
    assert verdict(paired_interval(dict(enumerate(challenger)), dict(enumerate(baseline))), 0.0, "below") == SUPPORTED


def test_a_threshold_other_than_zero_and_too_few_seeds():
    assert verdict(t_interval([0.95, 0.97, 0.96]), 1 / 1.15, "above") == SUPPORTED
    assert verdict(t_interval([0.70, 0.72, 0.71]), 1 / 1.15, "above") == CONTRADICTED
    assert verdict(t_interval([0.9]), 0.0, "above") == INCONCLUSIVE
    assert verdict(paired_interval({0: 1.0, 1: 2.0}, {2: 1.0}), 0.0, "above") == INCONCLUSIVE


def test_a_zero_width_interval_decides_only_by_the_sign_test():
    """Three seeds all at Spearman 0.5 (a rank statistic over three N') give a zero-width t-interval; the exact sign
    test of 3 values (p = 0.25) decides nothing; 6 equal values (p = 0.031) do."""
    assert t_interval([0.5, 0.5, 0.5]).low == t_interval([0.5, 0.5, 0.5]).high == 0.5
    assert verdict(t_interval([0.5] * 3), 0.0, "above") == INCONCLUSIVE
    assert verdict(t_interval([0.0] * 3), 0.5, "above") == INCONCLUSIVE
    assert verdict(t_interval([0.5] * 6), 0.0, "above") == SUPPORTED
    assert verdict(t_interval([0.0] * 6), 0.5, "above") == CONTRADICTED
