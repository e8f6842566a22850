"""Lyapunov token sensitivity: exponents of a linear ODE, agreement of the two Jacobians, tiny-model spectra."""

import haliax as hax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from models.models_testkit import TINY_SHAPE, random_tokens, tiny_model

from pipeline.analysis.lyapunov import (
    exponents_table,
    full_sequence_jacobian,
    heatmap_html,
    lyapunov_spectrum,
    query_jacobian,
    token_exponents,
)


def test_linear_system_exponents_are_the_real_parts_of_its_eigenvalues():
    """dx/dt = A x, A = P diag-block(0.3 ± 2i, -0.5) P⁻¹: exponents 0.3, 0.3, -0.5 (Euler, QR, T = 40)."""
    block = np.array([[0.3, 2.0, 0.0], [-2.0, 0.3, 0.0], [0.0, 0.0, -0.5]])
    basis = np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.3], [0.2, 0.0, 1.0]])
    a = basis @ block @ np.linalg.inv(basis)
    horizon, steps = 40.0, 20000
    step_jacobians = jnp.broadcast_to(jnp.asarray(a * horizon / steps, jnp.float32), (steps, 1, 3, 3))
    exponents = np.asarray(lyapunov_spectrum(step_jacobians, horizon))[0]
    np.testing.assert_allclose(exponents, [0.3, 0.3, -0.5], atol=0.03)


@pytest.fixture(scope="module")
def diffeq():
    return tiny_model("diffeq")


@pytest.mark.parametrize("placement", [{"scale": 0.25}, {"step": 0.25}], ids=["dt-folded", "dt-on-output"])
def test_single_query_jacobian_matches_the_full_sequence(diffeq, placement):
    Pos = hax.Axis("position", TINY_SHAPE["seq_len"])
    x = diffeq.embeddings.embed(random_tokens(1, Pos), pos_ids=hax.arange(Pos), key=None)
    block = diffeq.transformer.field.at(0.4, **placement)
    for j in (Pos.size - 1, 5):
        prefix = x["position", : j + 1]
        single = np.asarray(jax.jit(query_jacobian)(block, prefix))
        full = np.asarray(full_sequence_jacobian(block, x, j))
        assert single.shape == full.shape == (j + 1, TINY_SHAPE["hidden_dim"], TINY_SHAPE["hidden_dim"])
        assert np.abs(single - full).max() <= 1e-5 * np.abs(full).max()


def test_token_exponents_table_and_heatmap(diffeq):
    ids = [3, 17, 42, 8, 29]
    exponents = token_exponents(diffeq, ids)
    assert exponents.shape == (len(ids), TINY_SHAPE["hidden_dim"])
    assert np.isfinite(exponents).all() and (np.diff(exponents, axis=1) <= 1e-6).all()
    assert np.ptp(exponents[:, 0]) > 0
    tokens = ["a", "<b>", "c", "d", "e"]
    table = exponents_table("run", 0, tokens, exponents)
    assert len(table) == exponents.size and set(table["exponent_index"]) == set(range(exponents.shape[1]))
    page = heatmap_html("run", [(tokens, exponents[:, 0])])
    assert "&lt;b&gt;" in page and page.count("<span") == len(tokens)
