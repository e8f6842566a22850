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


def schedules(steps: int, lr: float, warmup_fraction: float, min_lr_ratio: float):
    train = pretrain_runs(load_preset({"preset": "tiny"}))["wt103-small-gpt"].train
    adamw = optimizer_config(train)
    adamw = type(adamw)(
        **{**adamw.__dict__, "learning_rate": lr, "warmup": warmup_fraction, "min_lr_ratio": min_lr_ratio}
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
    train = pretrain_runs(load_preset({"preset": "tiny"}))["wt103-small-gpt"].train
    adamw = optimizer_config(train)
    with pytest.raises(ValueError, match="one warm-up and one cosine decay"):
        type(adamw)(**{**adamw.__dict__, "lr_schedule": "linear"})
