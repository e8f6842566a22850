"""Compute/quality frontier of a trained DiffEqFormer (beyond the paper; docs/experiments.md#analyses): validation
loss (micro-averaged token NLL) when its ODE dx/dt = f(t, x) on (0, 1] is solved with N steps, dt = 1/N, by

- ``euler``: x_k = x_{k-1} + dt·f(t_k, x_{k-1}), t_k = k/N (the model's own scheme, §4.1; N = L is its forward);
- ``heun``: K1 = dt·f(t_{k-1}, x), K2 = dt·f(t_k, x + K1), x + (K1 + K2)/2;
- ``rk4``: classical Runge-Kutta, stages at t_{k-1}, t_{k-1} + dt/2 (twice) and t_k,

each stage's W(t) generated inside its step; embeddings, final LayerNorm and unembedding unchanged."""

import math
from pathlib import Path

import equinox as eqx
import haliax as hax
import jax
import jax.numpy as jnp
import pandas as pd
from haliax import NamedArray

from pipeline.analysis.tidy import FRONTIER_COLUMNS

SOLVER_STAGES = {"euler": 1, "heun": 2, "rk4": 4}


def solver_step(solver: str, blocks: list, x: NamedArray, mask) -> NamedArray:
    """One step of ``solver`` from x with the step's stage blocks (their increments are dt·f)."""

    def increment(block, y):
        return block.increment(y, mask)

    if solver == "euler":
        return x + increment(blocks[0], x)
    if solver == "heun":
        k1 = increment(blocks[0], x)
        return x + (k1 + increment(blocks[1], x + k1)) / 2
    start, middle, end = blocks
    k1 = increment(start, x)
    k2 = increment(middle, x + k1 / 2)
    k3 = increment(middle, x + k2 / 2)
    k4 = increment(end, x + k3)
    return x + (k1 + 2 * k2 + 2 * k3 + k4) / 6


STAGE_OFFSETS = {"euler": (1.0,), "heun": (0.0, 1.0), "rk4": (0.0, 0.5, 1.0)}
"""Stage times of step k (from t_{k-1} = (k-1)/N) in units of dt."""


def solve(field, x: NamedArray, mask, solver: str, num_steps) -> NamedArray:
    """x(1) from x(0) = ``x`` by ``num_steps`` steps of ``solver``; the field's blocks x ↦ x + dt·f(t, x) of
    each stage time (on the field's time grid) are generated inside the step (``num_steps`` may be traced: one
    compilation for every N)."""
    if solver not in SOLVER_STAGES:
        raise ValueError(f"analysis.frontier.solvers: unknown {solver!r}; expected one of {', '.join(SOLVER_STAGES)}.")
    steps = jnp.asarray(num_steps, dtype=jnp.float32)

    def step(k, y):
        blocks = [
            field.at(field.times(k.astype(jnp.float32) + offset, steps), scale=1.0 / steps)
            for offset in STAGE_OFFSETS[solver]
        ]
        return solver_step(solver, blocks, y, mask)

    return jax.lax.fori_loop(0, jnp.asarray(num_steps, dtype=jnp.int32), step, x)


@eqx.filter_jit
def batch_nll(model, example, weight: NamedArray, solver: str, num_steps) -> tuple[jnp.ndarray, jnp.ndarray]:
    """(Σ token NLL, Σ loss mask) of a batch of ``LmExample``s weighted per example by ``weight`` (0 for the
    padding of the last batch), the transformer solved by ``solver`` with ``num_steps`` (an array) steps. Attention
    uses the examples' own mask, as training does: causal, and not across the packed documents' boundaries."""
    tokens = example.tokens
    Pos = tokens.resolve_axis("position")
    x = model.embeddings.embed(tokens, pos_ids=hax.arange(Pos), key=None)
    h = model.transformer.ln_f(solve(model.transformer.field, x, example.attn_mask, solver, num_steps))
    logits = hax.dot(h, model.get_lm_head(), axis="embed").astype(jnp.float32)
    log_probs = hax.nn.log_softmax(logits, axis=model.Vocab)
    targets = hax.roll(tokens, -1, Pos)
    nll = -hax.take(log_probs, model.Vocab, targets)
    mask = example.loss_mask.astype(jnp.float32) * weight
    return hax.sum(nll * mask).array, hax.sum(mask).array


def validation_loss(model, batches, solver: str, num_steps: int) -> float:
    """Micro-averaged validation NLL over ``batches`` ((LmExamples, weights) with a batch axis)."""
    total, count = 0.0, 0.0
    for example, weight in batches:
        nll, n = batch_nll(model, example, weight, solver, jnp.asarray(num_steps, dtype=jnp.int32))
        total, count = total + float(nll), count + float(n)
    return total / count


def step_counts(trained_steps: int, step_factors: list[float]) -> list[tuple[float, int]]:
    """(factor, N = round(factor·L), at least 1) for every factor."""
    return [(factor, max(1, round(factor * trained_steps))) for factor in step_factors]


def validation_batches(
    cache_dir: str, tokenizer_dir: str, seq_len: int, batch_size: int, max_batches: int | None
) -> list:
    """The validation split of a run's token cache as (batched ``LmExample``s, per-example weights) through the
    pretrain stage's Levanter dataset (all when ``max_batches`` is None); the last batch padded with weight-0
    copies (one compiled shape)."""
    from pipeline.train.setup import data_config

    data = data_config(cache_dir, tokenizer_dir)
    dataset = data.validation_sets(hax.Axis("position", seq_len), monitors=False)[""].as_sync_dataset()
    n_examples = len(dataset) if max_batches is None else min(len(dataset), max_batches * batch_size)
    if n_examples == 0:
        raise ValueError(f"{cache_dir}/validation: the validation split is empty; rebuild the token cache.")
    Batch = hax.Axis("batch", batch_size)
    batches = []
    for begin in range(0, n_examples, batch_size):
        indices = list(range(begin, min(begin + batch_size, n_examples)))
        weight = hax.named(jnp.asarray([1.0] * len(indices) + [0.0] * (batch_size - len(indices))), Batch)
        examples = dataset.get_batch(indices + [indices[0]] * (batch_size - len(indices)))
        batches.append((hax.tree_util.tree_map(lambda *leaves: hax.stack(Batch, leaves), *examples), weight))
    return batches


def run_frontier(
    run_dir: str,
    cache_dir: str,
    tokenizer_dir: str,
    out_csv: str,
    step_factors: list[float],
    solvers: list[str],
    batch_size: int,
    max_batches: int | None,
) -> dict:
    """Validation loss of one trained DiffEqFormer for every (solver, N); writes the tidy table to ``out_csv``."""
    import logging

    from levanter.compat.hf_checkpoints import load_tokenizer

    from pipeline.artifacts import atomic_write_text
    from pipeline.models.checkpoint import load_diffeq_run

    spec, model = load_diffeq_run(run_dir, len(load_tokenizer(tokenizer_dir)), "the frontier")
    batches = validation_batches(cache_dir, tokenizer_dir, spec.model.seq_len, batch_size, max_batches)
    trained_steps = spec.model.num_layers
    run = (spec.run_id, spec.model.family, spec.dataset, trained_steps)
    rows = []
    for solver in solvers:
        for factor, num_steps in step_counts(trained_steps, step_factors):
            loss = validation_loss(model, batches, solver, num_steps)
            logging.info("%s %s N=%d: validation loss %.4f", spec.run_id, solver, num_steps, loss)
            evaluations = SOLVER_STAGES[solver] * num_steps
            rows.append((*run, solver, num_steps, factor, evaluations, loss, math.exp(loss)))
    atomic_write_text(Path(out_csv), pd.DataFrame(rows, columns=FRONTIER_COLUMNS).to_csv(index=False))
    return {"run_id": spec.run_id, "rows": len(rows)}
