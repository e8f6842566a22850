"""The train step the pipeline trains with feeds AdamW the gradient of its loss at every step, not only the first:
the gradient implied by AdamW's first moment, (mu_t+1 - beta1 mu_t) / (1 - beta1), equals ``jax.grad`` of the
same loss, batch and dropout key (clipped as the optimiser clips it), step after step, while other jitted work runs
between the steps (as the loop's evaluations and hooks do; here the check's own gradient). Levanter's own step
donates the state's buffers; with jaxlib 0.7.2 that fed AdamW wrong gradients once other jitted work ran between
steps (pipeline.train.trainer). With today's step this check also passes under Levanter's donating step (checked
2026-11-29, cause not traced): it guards the gradient of the step the pipeline trains with, and no longer reproduces
the donation fault itself."""

import equinox as eqx
import haliax as hax
import jax
import jax.numpy as jnp
import jax.random as jrandom
import levanter
import numpy as np
from haliax.partitioning import round_axis_for_partitioning
from levanter.models.lm_model import LmExample, compute_next_token_loss
from levanter.utils.tree_utils import inference_mode

from pipeline.config import load_preset, pretrain_runs
from pipeline.models import build_initialised
from pipeline.models.checkpoint import run_model_config
from pipeline.train.schedule import AdamInStateState
from pipeline.train.setup import optimizer_config, trainer_config
from pipeline.train.trainer import UndonatedTrainer

STEPS = 5


def float_arrays(tree) -> list[jax.Array]:
    arrays = (leaf.array if hasattr(leaf, "array") else leaf for leaf in jax.tree_util.tree_leaves(tree))
    return [array for array in arrays if jnp.issubdtype(array.dtype, jnp.inexact)]


def float_leaves(tree) -> list[np.ndarray]:
    return [np.asarray(array, np.float64) for array in float_arrays(tree)]


def first_moment(state) -> list[np.ndarray]:
    """AdamW's first moment (``AdamInStateState.mu``, as optax's ``ScaleByAdamState.mu``) in the trainer state."""
    found = [
        node
        for node in jax.tree_util.tree_leaves(state.opt_state, is_leaf=lambda n: isinstance(n, AdamInStateState))
        if isinstance(node, AdamInStateState)
    ]
    assert len(found) == 1
    return float_leaves(found[0].mu)


def test_adamw_gets_the_gradient_of_the_loss_at_every_step(tmp_path):
    spec = pretrain_runs(load_preset({"preset": "tiny"}))["wt103-small-gpt"]  # GPT, dropout 0.1, reference init
    train = spec.train
    adamw = optimizer_config(train)
    config = trainer_config(spec.run_id, train, tmp_path, require_accelerator=False)
    levanter.initialize(config)
    with UndonatedTrainer(config, adamw.build(train.steps), compute_next_token_loss) as trainer:
        data_key, model_key, training_key = jrandom.split(jrandom.PRNGKey(train.seed), 3)
        Vocab = round_axis_for_partitioning(hax.Axis("vocab", 2048), trainer.parameter_axis_mapping)
        Pos = hax.Axis("position", spec.model.seq_len)
        state = trainer.initial_state(
            training_key,
            model_init=lambda: build_initialised(run_model_config(spec), Vocab, key=model_key, init=spec.model.init),
        )

        gradient = eqx.filter_jit(eqx.filter_grad(lambda m, b, k: compute_next_token_loss(m, b, key=k).scalar()))
        for step in range(STEPS):
            tokens = hax.random.randint(jrandom.fold_in(data_key, step), (trainer.TrainBatch, Pos), 0, Vocab.size)
            batch = hax.vmap(LmExample.causal, trainer.TrainBatch)(tokens)
            with hax.axis_mapping(trainer.compute_axis_mapping):
                grad = gradient(inference_mode(state.model, False), batch, jrandom.split(state.training_key)[0])
            norm = float(jnp.sqrt(sum(jnp.sum(jnp.square(leaf)) for leaf in float_arrays(grad))))
            expected = [
                np.asarray(leaf, np.float64) * min(1.0, adamw.max_grad_norm / norm)  # clip_by_global_norm
                for leaf in float_arrays(grad)
            ]
            mu = first_moment(state)
            state = trainer.train_step(state, batch).state
            used = [
                (new - train.beta1 * old) / (1 - train.beta1) for old, new in zip(mu, first_moment(state), strict=True)
            ]
            error = max(
                np.linalg.norm(u - e) / max(np.linalg.norm(e), 1e-12) for u, e in zip(used, expected, strict=True)
            )
            assert error < 1e-4, f"step {step}: AdamW got a gradient {error:.2g} away from the loss's gradient"
