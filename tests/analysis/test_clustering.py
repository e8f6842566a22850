"""Clustering simulation (App. C.8): deterministic, and weight sharing clusters where a quartic a(t) does not."""

import numpy as np
import pytest

from pipeline.analysis.clustering import cluster_statistics, magnitude, run_clustering

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
