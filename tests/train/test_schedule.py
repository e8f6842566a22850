"""The learning-rate schedule the train step reads from its optimizer state (``pipeline.train.schedule``) is
Levanter's warm-up + cosine schedule, step for step, and one compiled program serves every run's numbers. Levanter's
schedule jitted with its numbers as constants is the reference: XLA folds those constants (e.g. a division into a
multiplication), so the two agree to float32 rounding (≤ 1e-6 relative), not bit for bit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from levanter.optim import AdamConfig

from pipeline.config import load_preset, pretrain_runs
from pipeline.train.setup import optimizer_config

RUNS = [  # (steps, lr, warmup_fraction, min_lr_ratio): the tiny preset's (no warm-up step), and warm-ups of 1 and 12
    (40, 6.0e-3, 0.01, 0.1),
    (30, 3.0e-3, 0.05, 0.0),
    (25, 2.0e-3, 0.5, 0.25),
]
TRAIN = pretrain_runs(load_preset({"preset": "tiny"}))["wt103-small-gpt"].train
ADAMW = optimizer_config(TRAIN)
"""The tiny preset's ``wt103-small-gpt`` training numbers and its optimizer, which each test varies."""


def schedules(steps: int, lr: float, warmup_fraction: float, min_lr_ratio: float):
    adamw = type(ADAMW)(
        **{**ADAMW.__dict__, "learning_rate": lr, "warmup": warmup_fraction, "min_lr_ratio": min_lr_ratio}
    )
    return adamw.lr_scheduler(steps), AdamConfig.lr_scheduler(adamw, steps)


def test_the_schedule_in_the_state_is_levanters_at_every_step_in_one_compiled_program():
    first_run = schedules(*RUNS[0])[0]
    compiled = jax.jit(lambda schedule_state: first_run(schedule_state))
    for run in RUNS:
        stateful, constants = schedules(*run)
        reference = jax.jit(constants)
        state = stateful.init()
        values, expected = [], []
        for step in range(run[0] + 2):
            values.append(float(compiled(state)))
            expected.append(float(reference(jnp.int32(step))))
            state = stateful.update(state)
        np.testing.assert_allclose(values, expected, rtol=1e-6, atol=0)
    assert compiled._cache_size() == 1


def test_a_schedule_the_state_cannot_hold_is_refused():
    with pytest.raises(ValueError, match="one warm-up and one cosine decay"):
        type(ADAMW)(**{**ADAMW.__dict__, "lr_schedule": "linear"})


def test_adam_numbers_in_the_state_update_as_levanters_constants_in_one_compiled_program():
    """Levanter's AdamW (β1, β2, ε constants of the program) is the reference for ``MaskedAdamConfig``'s (β1, β2, ε
    optimizer state): five updates of a small tree, half its leaves decayed, gradients large enough to be clipped,
    for the tiny preset's β and the β2 ablation's, one compiled update for all."""
    key = jax.random.PRNGKey(0)
    params = {
        "embeddings": {"token_embeddings": {"weight": jax.random.normal(key, (8, 4))}},
        "mlp": {"c_fc": {"weight": jax.random.normal(jax.random.fold_in(key, 1), (4, 4))}},
        "ln": {"weight": jnp.ones(4)},
    }
    grads = [
        jax.tree.map(lambda p, i=i: jax.random.normal(jax.random.fold_in(key, i), p.shape), params) for i in range(5)
    ]

    def update(optimizer):
        return jax.jit(lambda g, state, p: optimizer.update(g, state, p))

    compiled = update(ADAMW.build(TRAIN.steps))
    for beta1, beta2, epsilon in [(0.9, 0.999, 1e-8), (0.9, 0.95, 1e-6), (0.8, 0.98, 1e-5)]:
        adamw = type(ADAMW)(**{**ADAMW.__dict__, "beta1": beta1, "beta2": beta2, "epsilon": epsilon})
        reference = update(AdamConfig.build(adamw, TRAIN.steps))
        state, expected_state = adamw.build(TRAIN.steps).init(params), AdamConfig.build(adamw, TRAIN.steps).init(params)
        for g in grads:
            updates, state = compiled(g, state, params)
            expected, expected_state = reference(g, expected_state, params)
            for leaf, expected_leaf in zip(jax.tree.leaves(updates), jax.tree.leaves(expected), strict=True):
                np.testing.assert_allclose(leaf, expected_leaf, rtol=1e-6, atol=0)
    assert compiled._cache_size() == 1
