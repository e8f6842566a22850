"""DiffEqFormer trains under the pipeline's trainer (Levanter's Trainer without buffer donation), Levanter's loss,
the pipeline's trainer configuration and bf16 compute (paper App. C.4): a few Adam steps decrease its loss (the
other families': test_model_training.py)."""

import functools

import jax
import numpy as np
import optax
from cli_testkit import tiny_spec
from levanter.models.lm_model import compute_next_token_loss
from models_testkit import VOCAB, batch_example, init_prng, tiny_config

from pipeline.train.setup import trainer_config
from pipeline.train.trainer import UndonatedTrainer


def test_levanter_trainer_steps_decrease_the_loss(tmp_path):
    config = tiny_config("diffeq", initializer_range=0.02)
    train = tiny_spec(batch_size=4, steps=4, mixed_precision="p=f32,c=bfloat16").train
    trainer = UndonatedTrainer(
        trainer_config("diffeq-smoke", train, tmp_path), optax.adam(3e-3), compute_next_token_loss
    )
    batch = batch_example(0, config.Pos)
    with trainer, init_prng():
        model_init = functools.partial(config.build, VOCAB, key=jax.random.PRNGKey(1))
        state = trainer.initial_state(jax.random.PRNGKey(0), model_init=model_init)
        losses = []
        for _ in range(4):
            info = trainer.train_step(state, batch)
            state = info.state
            losses.append(float(info.loss))
    assert losses[-1] < losses[0] and all(np.isfinite(losses))
    assert state.model.transformer.field.attn.c_attn.proj.weight.dtype == jax.numpy.float32
