"""Compute/quality frontier: Euler with N = L is the model's own forward; higher-order solvers converge."""

import haliax as hax
import jax.numpy as jnp
import numpy as np
from levanter.models.lm_model import LmExample, compute_next_token_loss
from models.models_testkit import TINY_SHAPE, batch_example, random_tokens, tiny_model

from pipeline.analysis.frontier import batch_nll, solve, step_counts


def mean_loss(model, example, solver, num_steps):
    weight = hax.ones(example.tokens.resolve_axis("batch"))
    nll, count = batch_nll(model, example, weight, solver, jnp.asarray(num_steps, dtype=jnp.int32))
    return float(nll) / float(count)


def test_euler_with_trained_steps_reproduces_the_model_loss():
    model = tiny_model("diffeq")
    example = batch_example(3, hax.Axis("position", TINY_SHAPE["seq_len"]))
    own = float(compute_next_token_loss(model, example).array)
    assert np.isclose(mean_loss(model, example, "euler", TINY_SHAPE["num_layers"]), own, rtol=1e-5)
    assert abs(mean_loss(model, example, "euler", 1) - own) > 1e-4


def test_euler_with_trained_steps_reproduces_the_loss_of_packed_documents():
    """Levanter packs documents into one sequence and masks attention at their boundaries (segment ids): the
    frontier's solve must use the examples' own mask, as training and evaluation do."""
    model = tiny_model("diffeq")
    Pos = hax.Axis("position", TINY_SHAPE["seq_len"])
    Batch = hax.Axis("batch", 4)
    tokens = random_tokens(5, Pos, Batch)
    segments = hax.named((jnp.arange(Pos.size) >= Pos.size // 3).astype(jnp.int32)[None, :].repeat(4, 0), (Batch, Pos))
    example = hax.vmap(LmExample.causal, Batch)(tokens, segment_ids=segments)
    own = float(compute_next_token_loss(model, example).array)
    assert np.isclose(mean_loss(model, example, "euler", TINY_SHAPE["num_layers"]), own, rtol=1e-5)


class ScalarOde:
    """dx/dt = a·cos(t)·x as a field with the model field's interface (``times(k, N)`` → k/N, ``at(t, scale)`` → a
    block whose ``increment`` is scale·f(t, ·)); exact x(1) = x(0)·exp(a·sin 1)."""

    rate = 1.5

    class Block:
        def __init__(self, factor):
            self.factor = factor

        def increment(self, y, mask):
            return self.factor * y

    def times(self, k, num_steps):
        return k / num_steps

    def at(self, t, scale):
        return self.Block(scale * self.rate * jnp.cos(t))


def test_solvers_converge_at_their_orders_on_a_smooth_ode():
    """Error ratios when N doubles: ≈ 2 (Euler), 4 (Heun), 16 (RK4)."""
    exact = np.exp(ScalarOde.rate * np.sin(1.0))
    x0 = jnp.ones((), dtype=jnp.float32)
    for solver, order in (("euler", 1), ("heun", 2), ("rk4", 4)):
        coarse, fine = (abs(float(solve(ScalarOde(), x0, None, solver, n)) - exact) for n in (4, 8))
        assert 0.7 * 2**order < coarse / fine < 1.4 * 2**order


def test_step_counts_round_and_never_reach_zero():
    assert step_counts(6, [0.1, 0.25, 1.0, 4.0]) == [(0.1, 1), (0.25, 2), (1.0, 6), (4.0, 24)]
