"""Spectra of QK/OV pairs: exact eigenvalues of constructed matrices, and the tidy table of tiny models."""

import numpy as np
import pytest
from models.models_testkit import TINY_SHAPE, tiny_model

from pipeline.analysis.spectra import (
    SPECTRA_COLUMNS,
    diffeq_weights,
    feedforward_spectra,
    gpt_weights,
    head_spectra,
    spectra_table,
)


def test_constructed_pair_has_the_known_eigenvalues():
    w_q = np.array([[2.0, 0.0], [0.0, 3.0], [0.0, 0.0]])
    w_k = np.array([[1.0, 0.0], [0.0, -1.0], [0.0, 0.0]])
    w_v = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    w_o = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0]])
    spectra = head_spectra(w_q[None], w_k[None], w_v[None], w_o[None])
    np.testing.assert_allclose(spectra["QK"][0], [-3.0, 2.0], atol=1e-12)
    np.testing.assert_allclose(sorted(spectra["OV"][0], key=lambda z: z.imag), [-1j, 1j], atol=1e-12)


def test_batched_heads_match_the_full_hidden_by_hidden_matrices():
    rng = np.random.default_rng(0)
    hidden, head_size, heads = 8, 2, 3
    w_q, w_k, w_v = rng.standard_normal((3, heads, hidden, head_size))
    w_o = rng.standard_normal((heads, head_size, hidden))
    spectra = head_spectra(w_q, w_k, w_v, w_o)
    for h in range(heads):
        for name, full in {"QK": w_q[h] @ w_k[h].T, "OV": w_v[h] @ w_o[h]}.items():
            eigenvalues = np.linalg.eigvals(full)
            nonzero = eigenvalues[np.argsort(-np.abs(eigenvalues))][:head_size]
            assert np.abs(eigenvalues[np.argsort(-np.abs(eigenvalues))][head_size:]).max() < 1e-10
            np.testing.assert_allclose(np.sort_complex(spectra[name][h]), np.sort_complex(nonzero), atol=1e-10)


@pytest.mark.parametrize("family", ["diffeq", "gpt"])
def test_table_covers_every_time_head_and_eigenvalue(family):
    model = tiny_model(family)
    layers, heads = TINY_SHAPE["num_layers"], TINY_SHAPE["num_heads"]
    head_size = TINY_SHAPE["hidden_dim"] // heads
    weights = diffeq_weights(model, 4) if family == "diffeq" else gpt_weights(model)
    table = spectra_table(*weights[:4], None, labels={"run_id": "r", "family": family, "dataset": "d"})
    n_times = 4 * layers if family == "diffeq" else layers
    assert list(table.columns) == SPECTRA_COLUMNS
    assert len(table) == 2 * n_times * heads * head_size
    times = np.sort(table["t"].unique())
    np.testing.assert_allclose(times, np.arange(1, n_times + 1) / n_times, rtol=1e-6)
    np.testing.assert_array_equal(np.ceil(table["t"] * layers - 1e-6) - 1, table["layer"])
    assert table["real"].abs().max() > 0 and np.isfinite(table[["real", "imag"]].to_numpy()).all()


@pytest.mark.parametrize("family", ["diffeq", "gpt"])
def test_feedforward_spectra_are_those_of_w_fc_w_proj(family):
    """docs/paper.md#spectra: the authors' code also takes the feed-forward W_fc·W_proj's spectra (hidden×hidden) per
    time."""
    model = tiny_model(family)
    hidden = TINY_SHAPE["hidden_dim"]
    weights = diffeq_weights(model, 2) if family == "diffeq" else gpt_weights(model)
    c_fc, c_proj = weights[4]
    table = spectra_table(*weights, labels={"run_id": "r", "family": family, "dataset": "d"})
    ff = table[table["matrix"] == "FF"]
    n_times = len(weights[2])
    assert len(ff) == n_times * hidden and set(ff["head"]) == {0}
    last = ff[ff["t"] == ff["t"].max()].sort_values("index")
    expected = np.linalg.eigvals(c_fc[-1].astype(np.float64) @ c_proj[-1].astype(np.float64))
    np.testing.assert_allclose(
        np.sort_complex(last["real"].to_numpy() + 1j * last["imag"].to_numpy()), np.sort_complex(expected), atol=1e-8
    )
    np.testing.assert_allclose(
        np.abs(feedforward_spectra(c_fc, c_proj))[:, 0],
        [np.abs(np.linalg.eigvals(a @ b)).max() for a, b in zip(c_fc, c_proj, strict=True)],
        rtol=1e-4,
    )


def test_spectral_trend_is_near_zero_untrained():
    """Untrained DiffEqFormers (4 seeds): the per-seed mean ρ over heads scatters around 0 (its interval, on Fisher's
    z, contains 0 and stays within [−1, 1])."""
    from pipeline.analysis.spectra import spectral_trend
    from pipeline.report.intervals import correlation_interval

    labels = {"run_id": "r", "family": "diffeq", "dataset": "d"}
    means = [
        spectral_trend(spectra_table(*diffeq_weights(tiny_model("diffeq", seed), 4)[:4], None, labels))["rho"].mean()
        for seed in range(4)
    ]
    untrained = correlation_interval(means)
    assert -1 <= untrained.low < 0 < untrained.high <= 1


def test_spectral_trend_is_positive_on_weights_that_grow_with_t_at_the_trained_times_only():
    """Weights W(t) = (1 + 3t)·W over the trained times t = l/L but spiking at the oversampled times between them:
    every head's largest |λ| grows with t at the trained times, which are all the trend statistic sees (ρ = 1 for each
    QK and OV head), as the authors' spectra do (docs/paper.md#spectra)."""
    from pipeline.analysis.spectra import spectral_trend

    labels = {"run_id": "r", "family": "diffeq", "dataset": "d"}
    c_attn, c_proj, times, layers, _ = diffeq_weights(tiny_model("diffeq"), 4)
    trained = np.isclose(times * TINY_SHAPE["num_layers"], np.round(times * TINY_SHAPE["num_layers"]))
    growth = np.where(trained, 1 + 3 * times, 100 - 50 * times)
    table = spectra_table(
        c_attn[:1] * growth[:, None, None, None, None],
        c_proj[:1] * growth[:, None, None, None],
        times,
        layers,
        None,
        labels,
    )
    trend = spectral_trend(table)
    assert len(trend) == 2 * TINY_SHAPE["num_heads"]
    np.testing.assert_allclose(trend["rho"], 1.0)
