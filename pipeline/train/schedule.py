"""The learning-rate schedule and Adam's β1, β2, ε as optimizer state, not constants of the compiled step, so one
compiled train step serves every run of a shape (docs/runs.md#runs-of-one-shape-share-their-compiled-programs).
The metrics log reads each step's rate from the state (``hyperparams["learning_rate"]``)."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
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
    """Warm-up then cosine decay, as state. At step t (warm-up w, decay d = steps − w, peak η, floor ratio α):
    η·t/w for t < w, else η·((1 − α)·½(1 + cos(π·min(t − w, d)/d)) + α), in optax's operation order."""

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


class AdamInStateState(NamedTuple):
    """Adam's step count and moments (as optax's ``ScaleByAdamState``) and its numbers, as arrays."""

    count: jnp.ndarray
    mu: optax.Updates
    nu: optax.Updates
    b1: jnp.ndarray
    b1_complement: jnp.ndarray
    b2: jnp.ndarray
    b2_complement: jnp.ndarray
    eps: jnp.ndarray


def scale_by_adam_in_state(b1: float, b2: float, eps: float) -> optax.GradientTransformation:
    """optax's ``scale_by_adam`` reading β1, β2, ε from its state: m ← (1 − β1)·g + β1·m, v ← (1 − β2)·g² + β2·v,
    u = (m/(1 − β1^t)) / (√(v/(1 − β2^t)) + ε), in optax's operation order. Its own float32 state, not
    ``inject_hyperparams``'s, which casts to the parameters' dtype (β2 0.999 is 1.0 in bfloat16)."""

    def init(params) -> AdamInStateState:
        return AdamInStateState(
            count=jnp.zeros([], jnp.int32),
            mu=optax.tree.zeros_like(params),
            nu=optax.tree.zeros_like(params),
            b1=jnp.asarray(b1, jnp.float32),
            b1_complement=jnp.asarray(1 - b1, jnp.float32),
            b2=jnp.asarray(b2, jnp.float32),
            b2_complement=jnp.asarray(1 - b2, jnp.float32),
            eps=jnp.asarray(eps, jnp.float32),
        )

    def update(updates, state: AdamInStateState, params=None):
        mu = jax.tree.map(lambda g, m: state.b1_complement * g + state.b1 * m, updates, state.mu)
        nu = jax.tree.map(lambda g, v: state.b2_complement * g**2 + state.b2 * v, updates, state.nu)
        count = safe_increment(state.count)
        mu_hat = optax.tree.bias_correction(mu, state.b1, count)
        nu_hat = optax.tree.bias_correction(nu, state.b2, count)
        updates = jax.tree.map(lambda m, v: m / (jnp.sqrt(v) + state.eps), mu_hat, nu_hat)
        moments = {"mu": optax.tree.cast_like(mu, state.mu), "nu": optax.tree.cast_like(nu, state.nu)}
        return updates, state._replace(count=count, **moments)

    return optax.GradientTransformation(init, update)
