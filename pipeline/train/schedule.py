"""The learning-rate schedule as optimizer state, so that one compiled train step serves every run of a shape.

Levanter's schedule is a Python closure over the peak rate, the warm-up and the decay steps; jitted into the train
step, those numbers become constants of the program, and two runs of one shape with other step counts or rates
compile two steps (JAX's persistent cache keys on the program). Here the same schedule (linear warm-up from 0 to
``lr`` over ``warmup_steps``, then cosine decay to ``min_lr_ratio``·lr over the remaining steps; optax's
``join_schedules`` of ``linear_schedule`` and ``cosine_decay_schedule`` as Levanter builds them) reads its numbers
from arrays in the optimizer state (optax's ``StatefulSchedule``, kept by ``inject_hyperparams``) and counts its
steps there. The metrics log reads each step's rate from the state (``hyperparams["learning_rate"]``), as the step
computed it: no eager schedule (a dozen one-op programs to compile per job).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from optax import safe_increment
from optax.schedules import StatefulSchedule


class ScheduleState(NamedTuple):
    """The step count and the schedule's numbers, as arrays of the optimizer state."""

    count: jnp.ndarray
    peak_lr: jnp.ndarray
    warmup_steps: jnp.ndarray
    decay_steps: jnp.ndarray
    min_lr_ratio: jnp.ndarray
    decay_span: jnp.ndarray


class WarmupCosineInState(StatefulSchedule):
    """Warm-up then cosine decay whose numbers are state, not constants of the compiled step.

    At step t (warm-up w, decay d = steps − w, peak η, floor ratio α): η·t/w for t < w, else
    η·((1 − α)·½(1 + cos(π·min(t − w, d)/d)) + α), in the operation order of optax's schedules, with ``1 − α``
    rounded from a Python float as optax does (``decay_span``)."""

    def __init__(self, peak_lr: float, warmup_steps: int, decay_steps: int, min_lr_ratio: float):
        if decay_steps <= 0:
            raise ValueError(f"the cosine decay needs positive decay steps, got {decay_steps} (train.steps too small).")
        self.numbers = (peak_lr, warmup_steps, decay_steps, min_lr_ratio)

    def init(self) -> ScheduleState:
        peak_lr, warmup_steps, decay_steps, min_lr_ratio = self.numbers
        return ScheduleState(
            count=jnp.zeros([], jnp.int32),
            peak_lr=jnp.asarray(peak_lr, jnp.float32),
            warmup_steps=jnp.asarray(warmup_steps, jnp.int32),
            decay_steps=jnp.asarray(float(decay_steps), jnp.float32),
            min_lr_ratio=jnp.asarray(min_lr_ratio, jnp.float32),
            decay_span=jnp.asarray(1 - min_lr_ratio, jnp.float32),
        )

    def update(self, state: ScheduleState, **extra_args) -> ScheduleState:
        return state._replace(count=safe_increment(state.count))

    def __call__(self, state: ScheduleState, **extra_args) -> jnp.ndarray:
        step = state.count
        warmup = (0.0 - state.peak_lr) * (
            1 - jnp.clip(step, 0, state.warmup_steps) / state.warmup_steps
        ) + state.peak_lr
        decayed_steps = jnp.minimum(step - state.warmup_steps, state.decay_steps)
        cosine = 0.5 * (1 + jnp.cos(jnp.pi * decayed_steps / state.decay_steps))
        decay = state.peak_lr * (state.decay_span * cosine + state.min_lr_ratio)
        return jnp.where(step < state.warmup_steps, warmup, decay)
