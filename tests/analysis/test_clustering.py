"""Clustering simulation (App. C.8): deterministic, and weight sharing clusters where a quartic a(t) does not."""

import numpy as np
import pytest

from pipeline.analysis.clustering import (
    SWEEP_COLUMNS,
    cluster_statistics,
    magnitude,
    run_clustering,
    simulate_notebook,
    standardize,
    sweep_clustering,
    sweep_magnitude,
)

PAPER_SETUP = dict(tokens=40, hidden_dim=3, steps=200, seed=0)


@pytest.fixture(scope="module")
def paper_run():
    return run_clustering(magnitudes=["constant", "quartic"], **PAPER_SETUP)


def test_weight_sharing_clusters_and_quartic_growth_disperses(paper_run):
    _, stats = paper_run
    constant, quartic = (stats.set_index("magnitude").loc[name] for name in ("constant", "quartic"))
    assert constant["n_clusters"] < quartic["n_clusters"]
    assert constant["mean_pairwise_distance"] < quartic["mean_pairwise_distance"]


def test_simulation_is_deterministic_and_tidy(paper_run):
    trajectories, _ = paper_run
    again, _ = run_clustering(magnitudes=["constant", "quartic"], **PAPER_SETUP)
    assert trajectories.equals(again)
    assert len(trajectories) == 2 * (PAPER_SETUP["steps"] + 1) * PAPER_SETUP["tokens"]
    assert list(trajectories.columns) == ["magnitude", "degree", "step", "t", "token", "x0", "x1", "x2"]
    start = trajectories[trajectories["step"] == 0]
    assert start[["x0", "x1", "x2"]].abs().to_numpy().max() <= 1.0


def test_magnitudes_and_cluster_count():
    t = np.array([0.0, 0.5, 1.0])
    np.testing.assert_allclose(magnitude("cubic", t), [0.0, 0.125, 1.0])
    np.testing.assert_allclose(magnitude("constant", t), [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="analysis.clustering.magnitudes"):
        magnitude("quintic", t)
    points = np.array([[0.0, 0, 0], [0.05, 0, 0], [1.0, 0, 0], [1.0, 1.0, 0]])
    assert cluster_statistics(points, threshold=0.1)["n_clusters"] == 3


def test_normalised_magnitudes_have_the_constant_mean_over_the_horizon():
    t = np.linspace(0.0, 10.0, 100001)
    for name in ("constant", "linear", "quartic"):
        assert np.trapezoid(sweep_magnitude(name, t, 10.0, True), t) / 10.0 == pytest.approx(1.0, rel=1e-4)
    np.testing.assert_allclose(sweep_magnitude("quartic", t, 10.0, False), t ** 4)


def test_sweep_covers_every_regime_and_seed_with_the_notebook_dynamics():
    """docs/paper.md#clustering-notebook: one run per horizon, normalisation, seed and magnitude; at T = 1 with the
    unnormalised t⁴ (weaker than the constant everywhere) weight sharing ends with fewer clusters than t⁴ on most
    seeds."""
    sweep = sweep_clustering(tokens=40, hidden_dim=3, steps=100, magnitudes=["constant", "quartic"], horizons=[1.0],
                             seeds=6, x0_range=2.0)
    assert list(sweep.columns) == SWEEP_COLUMNS and len(sweep) == 6 * 2 * 2
    weak = sweep[~sweep["normalised"]].pivot(index="seed", columns="magnitude", values="n_clusters")
    assert (weak["constant"] < weak["quartic"]).mean() >= 0.5
    x0 = np.random.default_rng(0).uniform(-2, 2, size=(5, 3))
    still = simulate_notebook(x0, np.eye(3), np.zeros((3, 3)), np.ones(10), 1.0)
    np.testing.assert_allclose(still, standardize(x0), atol=1e-3)
