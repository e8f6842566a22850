"""What every benchmark of ``pipeline.bench`` times with: interleaved rounds of jitted calls, their median and
interquartile range, and one jitted AdamW train step as Levanter's ``Trainer`` takes it."""

import time
from collections.abc import Callable

import equinox as eqx
import jax
import numpy as np
from levanter.models.lm_model import compute_next_token_loss


def time_interleaved(calls: dict[str, Callable], repeats: int, warmup: int) -> tuple[dict[str, list], dict]:
    """Warm up (compile) each call, then ``repeats`` rounds calling each once in turn (A B A B …, so host drift
    affects all alike); returns seconds per call (blocked until ready) and each call's last output."""
    outputs = {}
    for name, call in calls.items():
        for _ in range(warmup):
            outputs[name] = jax.block_until_ready(call())
    samples = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            outputs[name] = jax.block_until_ready(call())
            samples[name].append(time.perf_counter() - start)
    return samples, outputs


def summarise(seconds: list[float], tokens: int) -> dict:
    """Median and interquartile range in ms, tokens/s at the median, and the raw samples."""
    q25, median, q75 = (float(q) for q in np.percentile(seconds, [25, 50, 75]))
    return {
        "median_ms": 1e3 * median,
        "iqr_ms": 1e3 * (q75 - q25),
        "tokens_per_s": tokens / median,
        "samples_ms": [1e3 * s for s in seconds],
    }


@eqx.filter_jit(donate="all-except-first")
def train_step(batch, model, opt_state, optimizer, policy):
    """One step: next-token loss of ``model`` cast to the compute dtype of the jmp ``policy`` (as Levanter's Trainer
    does), its gradient and the ``optimizer`` update; the model and optimizer state are donated."""
    example, key = batch

    def loss_fn(model):
        return compute_next_token_loss(policy.cast_to_compute(model), example, key=key).array

    loss, grads = eqx.filter_value_and_grad(loss_fn)(model)
    updates, opt_state = optimizer.update(grads, opt_state, eqx.filter(model, eqx.is_inexact_array))
    return loss, eqx.apply_updates(model, updates), opt_state


class TrainLoop:
    """Calling it runs one ``train_step`` in place (the previous model and optimizer state are donated) and returns
    the loss, the model and the optimizer state, so that blocking on the result waits for the whole update."""

    def __init__(self, model, optimizer, example, policy, key=None):
        self.model, self.optimizer, self.batch, self.policy = model, optimizer, (example, key), policy
        self.opt_state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))

    def __call__(self):
        loss, self.model, self.opt_state = train_step(
            self.batch, self.model, self.opt_state, self.optimizer, self.policy
        )
        return loss, self.model, self.opt_state
