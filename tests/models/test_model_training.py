"""Training-side checks: exact gradients (float64 central differences) and a few optimiser steps."""

import equinox as eqx
import jax
import jax.experimental
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from levanter.models.lm_model import LmExample, compute_next_token_loss
from models_testkit import batch_example, build, random_tokens, tiny_config, tiny_model, train

GRAD_SHAPE = dict(seq_len=8, hidden_dim=16, num_heads=2, num_layers=2, time_embed_dim=4, sinusoidal_dim=4)


def time_mlp_weight(model):
    """The first layer of the QKV weight's time MLP: the deepest weight in the chain."""
    return model.transformer.field.attn.c_attn.mlp.lin1.weight


def test_gradient_matches_central_differences_in_float64():
    """<∇L, v> against (L(θ + εv) − L(θ − εv)) / 2ε for a random unit v over all parameters, and over the
    time MLP's first layer alone (through the MLP, the projection to W(t) and every Euler step)."""
    with jax.experimental.enable_x64():
        config = tiny_config("diffeq", **GRAD_SHAPE)
        params, static = eqx.partition(build(config), eqx.is_inexact_array)
        params = jax.tree_util.tree_map(lambda x: x.astype(jnp.float64), params)
        example = LmExample.causal(random_tokens(5, config.Pos))
        eps = 1e-5

        @jax.jit
        def derivatives(params, v):
            def loss(p):
                return compute_next_token_loss(eqx.combine(p, static), example, loss_dtype=jnp.float64).array

            v = jax.tree_util.tree_map(lambda x: x / optax.global_norm(v), v)
            plus = jax.tree_util.tree_map(lambda p, d: p + eps * d, params, v)
            minus = jax.tree_util.tree_map(lambda p, d: p - eps * d, params, v)
            numeric = (loss(plus) - loss(minus)) / (2 * eps)
            analytic = optax.tree_utils.tree_vdot(jax.grad(loss)(params), v)
            return analytic, numeric

        rng = np.random.default_rng(7)
        direction = jax.tree_util.tree_map(lambda x: jnp.asarray(rng.standard_normal(x.shape)), params)
        zeros = jax.tree_util.tree_map(jnp.zeros_like, direction)
        only_time_mlp = eqx.tree_at(time_mlp_weight, zeros, time_mlp_weight(direction))
        for v in (direction, only_time_mlp):
            analytic, numeric = derivatives(params, v)
            assert abs(analytic) > 1e-8
            np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-10)


@pytest.mark.parametrize("family", ["diffeq_llama", "shared", "shared_ode"])  # diffeq: test_levanter_trainer.py
def test_a_few_adam_steps_decrease_the_loss(family):
    model = tiny_model(family)
    _, losses = train(model, batch_example(6, model.Pos), steps=6)
    assert losses[-1] < losses[0] - 0.05
    assert all(np.isfinite(losses))
