"""Clustering simulation (App. C.8): the authors' notebook regime, its equal-mean control and the single picture."""

import numpy as np
import pandas as pd
import pytest

from pipeline.analysis.clustering import (
    CLUSTER_CUTS,
    SWEEP_COLUMNS,
    cluster_statistics,
    clustered,
    degree_trend,
    magnitude,
    simulate,
    standardize,
    time_grid,
    write_clustering,
)
from pipeline.config import load_preset

# Each setting of the claim regime and where the authors' notebook (GitHub zaphrode/qkvflow,
# notebooks/dynamic_transformers.ipynb) has it; docs/paper.md#clustering-notebook.
NOTEBOOK_SETTINGS = {
    "horizon": (20.0, "time-dependent cells ('## Fourth order' …): simulate(x0, T=20, dt=0.1)"),
    "dt": (0.1, "time-dependent cells: simulate(x0, T=20, dt=0.1) — 200 layers"),
    "scale": (0.5, "time-dependent cells: fn(t) = 0.5·(t/T)^k, the constant is 0.5"),
    "magnitude": ("notebook", "time-dependent cells: fn(t) = 0.5·(t/T)^k for k = 0..4"),
}
NOTEBOOK_SHAPE = {
    "tokens": (40, "seq_len = 40 of the simulation cells"),
    "hidden_dim": (3, "d = 3 of the simulation cells"),
    "x0_range": (2.0, "x0 = uniform(shape=(seq_len, d), minval=-2, maxval=2)"),
}


@pytest.mark.parametrize("preset", ["tiny", "mini", "paper"])
def test_the_claim_regime_is_the_notebooks_and_the_control_is_equal_mean(preset):
    settings = load_preset({"preset": preset})["analysis"]["clustering"]
    (claim,) = [regime for regime in settings["regimes"].values() if regime["role"] == "claim"]
    for key, (value, source) in NOTEBOOK_SETTINGS.items():
        assert claim[key] == value, f"{preset}: the claim's {key} is {claim[key]}, the notebook's {value} ({source})"
    for key, (value, source) in NOTEBOOK_SHAPE.items():
        assert settings[key] == value, f"{preset}: {key} is {settings[key]}, the notebook's is {value} ({source})"
    (control,) = [regime for regime in settings["regimes"].values() if regime["role"] == "control"]
    assert control == {**claim, "role": "control", "magnitude": "equal_mean"}
    assert settings["seeds"] >= 200


def test_time_grid_and_magnitudes_follow_the_notebook():
    """int(T/dt) + 1 times from 0 to T, one Euler update at each; equal_mean has the constant's mean over [0, T]."""
    times = time_grid(20.0, 0.1)
    assert len(times) == 201 and times[0] == 0.0 and times[-1] == 20.0
    np.testing.assert_allclose(
        magnitude("notebook", "quadratic", np.array([0.0, 10.0, 20.0]), 20.0, 0.5), [0.0, 0.125, 0.5]
    )
    np.testing.assert_allclose(magnitude("notebook", "constant", times, 20.0, 0.5), 0.5)
    np.testing.assert_allclose(magnitude("power", "cubic", np.array([0.5, 2.0]), 10.0, 1.0), [0.125, 8.0])
    fine = np.linspace(0.0, 20.0, 100001)
    for name in ("constant", "linear", "quartic"):
        mean = np.trapezoid(magnitude("equal_mean", name, fine, 20.0, 0.5), fine) / 20.0
        assert mean == pytest.approx(0.5, rel=1e-4)
    with pytest.raises(ValueError, match="analysis.clustering.magnitudes"):
        magnitude("notebook", "quintic", times, 20.0, 0.5)
    points = np.array([[0.0, 0, 0], [0.05, 0, 0], [1.0, 0, 0], [1.0, 1.0, 0]])
    assert cluster_statistics(points, threshold=0.1)["n_clusters"] == 3


def test_without_attention_the_state_is_the_standardised_start():
    x0 = np.random.default_rng(0).uniform(-2, 2, size=(1, 5, 3))
    still = simulate(x0, np.eye(3)[None], np.zeros((1, 3, 3)), np.ones(10), 0.1)
    assert still.shape == (11, 1, 5, 3)
    np.testing.assert_allclose(still[-1], standardize(x0), atol=1e-3)


@pytest.fixture(scope="module")
def tiny_settings():
    return {**load_preset({"preset": "tiny"})["analysis"]["clustering"], "seeds": 12}


@pytest.fixture(scope="module")
def tiny_outputs(tiny_settings, tmp_path_factory):
    out = tmp_path_factory.mktemp("clustering")
    write_clustering(str(out), tiny_settings)
    return {name: pd.read_csv(out / f"{name}.csv") for name in ("trajectories", "stats", "sweep")}


def test_sweep_reports_the_claim_and_the_equal_mean_control(tiny_outputs, tiny_settings):
    sweep = tiny_outputs["sweep"]
    assert list(sweep.columns) == SWEEP_COLUMNS
    roles = sweep.groupby("regime")["role"].unique().map(list).to_dict()
    assert roles == {"authors": ["claim"], "equal-mean": ["control"]}
    assert len(sweep) == 2 * tiny_settings["seeds"] * len(tiny_settings["magnitudes"]) * len(CLUSTER_CUTS)
    assert set(sweep["horizon"]) == {20.0} and set(sweep["dt"]) == {0.1}
    assert set(sweep["threshold"]) == set(CLUSTER_CUTS)
    # the notebook's regime: t⁴ does not cluster and clusters grow with the degree on most seeds
    assert (~clustered(sweep, "authors", "quartic", 0.1)).mean() >= 0.75
    assert (degree_trend(sweep, "authors", 0.1) > 0).mean() >= 0.75


def test_single_picture_uses_the_claim_regimes_dynamics(tiny_outputs):
    """The picture is seed 0 of the claim regime: the same final clusters as the sweep's seed 0, over the
    notebook's 201 updates of size dt = 0.1."""
    trajectories, stats, sweep = tiny_outputs["trajectories"], tiny_outputs["stats"], tiny_outputs["sweep"]
    assert trajectories["step"].max() == 201
    assert trajectories["t"].max() == pytest.approx(20.1)
    assert trajectories[trajectories["step"] == 0][["x0", "x1", "x2"]].abs().to_numpy().max() <= 2.0
    claim = sweep[(sweep["regime"] == "authors") & (sweep["seed"] == 0) & (sweep["threshold"] == 0.1)]
    picture = stats.set_index("magnitude")
    assert picture["n_clusters"].to_dict() == claim.set_index("magnitude").loc[picture.index, "n_clusters"].to_dict()


def test_clustering_and_the_degree_trend_are_read_per_seed_at_a_cut():
    """Seed 0 collapses with the constant (3 ≤ 10 of 40 clusters) and spreads with the degree (ρ = 1); seed 1 is
    flat at 25 clusters (no clustering, ρ undefined); the cut selects its own counts."""
    counts = {0.1: [3, 6, 9, 14, 20, 25, 25, 25, 25, 25], 0.2: [2, 2, 2, 2, 2, 25, 25, 25, 25, 25]}
    sweep = pd.DataFrame(
        [
            {"regime": "authors", "role": "claim", "horizon": 20.0, "dt": 0.1, "seed": seed, "magnitude": name,
             "degree": degree, "tokens": 40, "threshold": cut, "n_clusters": values[5 * seed + degree]}
            for cut, values in counts.items()
            for seed in (0, 1)
            for degree, name in enumerate(["constant", "linear", "quadratic", "cubic", "quartic"])
        ]
    )  # fmt: skip
    assert clustered(sweep, "authors", "constant", 0.1).to_dict() == {0: True, 1: False}
    assert clustered(sweep, "authors", "quartic", 0.1).to_dict() == {0: False, 1: False}
    trend = degree_trend(sweep, "authors", 0.1)
    assert trend[0] == pytest.approx(1.0) and np.isnan(trend[1])
    assert np.isnan(degree_trend(sweep, "authors", 0.2)[0])
    with pytest.raises(ValueError, match="no rows for regime 'T1-unnormalised' at cut 0.1"):
        clustered(sweep, "T1-unnormalised", "constant", 0.1)
