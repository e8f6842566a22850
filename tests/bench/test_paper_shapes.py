"""Paper-shape smoke: GPT-small and DiffEqFormer-small at the paper's exact shape (GPT-2's 50257-entry vocabulary,
seq_len 1024, D = 20, S = 128) take 2 real train steps at batch 1 on CPU through the pretraining loop's Levanter
Trainer, and the trained DiffEqFormer, resampled to N' = 9 Euler steps with the paper's LoRA (rank 200, embeddings
trainable), takes one fine-tune step; the loss is finite and the trainable parameters change. Random tokens stand
in for the tokenised corpora: a step's shapes and arithmetic do not depend on the token values."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from pipeline.config import finetune_runs, load_preset, pretrain_runs
from pipeline.models.param_count import GPT2_VOCAB

PRETRAIN_STEPS = 2
pytestmark = pytest.mark.paper_shape


def trainer_for(run_id: str, train, scratch: Path):
    import levanter
    from levanter.models.lm_model import compute_next_token_loss
    from levanter.trainer import Trainer

    from pipeline.train.loop import optimizer_config, trainer_config

    config = trainer_config(run_id, train, scratch)
    levanter.initialize(config)
    return Trainer(config, optimizer_config(train).build(train.steps), compute_next_token_loss)


def random_batch(trainer, seq_len: int, key):
    import haliax as hax
    from haliax import Axis

    from pipeline.step_plan import causal_examples

    tokens = hax.random.randint(key, (trainer.TrainBatch, Axis("position", seq_len)), 0, GPT2_VOCAB)
    return causal_examples(tokens, GPT2_VOCAB - 1, trainer.TrainBatch)


def checksums(model) -> list[float]:
    import jax
    import numpy as np

    return [float(np.asarray(leaf, dtype=np.float64).sum()) for leaf in jax.tree_util.tree_leaves(model)]


def take_steps(trainer, state, batch, steps: int):
    """``steps`` train steps (the function ``Trainer.train_step`` runs with no jit hook due); the losses and state."""
    before = checksums(state.trainable_model)
    losses = []
    for _ in range(steps):
        result = trainer._jit_train_step_fn_no_hook(state, (batch,), {})
        state = result.new_state
        losses.append(float(result.loss))
    changed = sum(a != b for a, b in zip(before, checksums(state.trainable_model), strict=True))
    return losses, changed, state


@pytest.fixture(scope="module")
def paper():
    config = load_preset({"preset": "paper"})
    return pretrain_runs(config), finetune_runs(config)


@pytest.mark.parametrize("run_id", ["wt103-small-gpt", "wt103-small-diffeq"])
def test_paper_small_shape_trains_and_resamples(paper, run_id, tmp_path):
    import jax.random as jrandom
    from haliax import Axis
    from haliax.partitioning import round_axis_for_partitioning
    from levanter.lora import LoraConfig, loraize

    from pipeline.models import GPT_LORA_TARGETS, build_initialised, discretize, init_lora
    from pipeline.models.checkpoint import run_model_config
    from pipeline.train.finetune import trainable_filter

    runs, finetunes = paper
    spec = runs[run_id]
    train = dataclasses.replace(spec.train, batch_size=1, steps=PRETRAIN_STEPS)
    model_key, data_key, training_key, lora_key, finetune_key = jrandom.split(jrandom.PRNGKey(0), 5)
    with trainer_for(run_id, train, tmp_path / "pretrain") as trainer:
        Vocab = round_axis_for_partitioning(Axis("vocab", GPT2_VOCAB), trainer.parameter_axis_mapping)
        state = trainer.initial_state(training_key, model_init=lambda: build_initialised(
            run_model_config(spec), Vocab, key=model_key, init=spec.model.init))
        batch = random_batch(trainer, spec.model.seq_len, data_key)
        losses, changed, state = take_steps(trainer, state, batch, PRETRAIN_STEPS)
        model = state.model
    assert all(math.isfinite(loss) for loss in losses), losses
    assert changed == len(checksums(state.trainable_model)), "every parameter should move"
    if spec.model.family != "diffeq":
        return

    finetune = finetunes["ft-wt103-owt-diffeq18-n9-lora"]
    adapter_key, adapter_init_key = jrandom.split(lora_key)
    resampled = init_lora(loraize(discretize(model, finetune.num_steps, finetune.resampling),
                                  LoraConfig(r=finetune.lora_rank, target_modules=list(GPT_LORA_TARGETS)),
                                  key=adapter_key), finetune.lora_init, adapter_init_key)
    ft_train = dataclasses.replace(finetune.train, batch_size=1, steps=1)
    with trainer_for(finetune.run_id, ft_train, tmp_path / "finetune") as trainer:
        state = trainer.initial_state(finetune_key, model=resampled,
                                      is_trainable=trainable_filter(finetune)(resampled))
        losses, changed, state = take_steps(trainer, state, batch, 1)
    assert math.isfinite(losses[0]), losses
    assert changed > 0, "the LoRA adapters and embeddings should move"
