"""Paper-shape smoke: GPT-small and DiffEqFormer-small at the paper's exact shape (GPT-2's 50257-entry vocabulary,
seq_len 1024, D = 20, S = 128) take 2 real train steps at batch 1 on CPU through the training loop's Levanter
``UndonatedTrainer``, and the trained DiffEqFormer, resampled by the fine-tune's own ``resample`` to N' = 9 Euler
steps with the paper's LoRA (rank 200, embeddings trainable), takes one fine-tune step; the loss is finite and the
trainable parameters change. Random tokens stand in for the tokenised corpora: a step's shapes and arithmetic do
not depend on the token values.

The Llama pair at the paper's width (hidden 2048, FF 8192, vocabulary 32000, seq_len 2048) with 2 layers is
compile-only: its train step at batch 1 is laid out on abstract state and compiled by the fit preview's planner
(``pipeline.planning.plans``), nothing allocated. DiffEqFormer-Llama's hypernetwork holds 6.64 B parameters at any
depth (26.6 GB in float32 before gradients and Adam state: more than this 24 GB machine); the 265 M-parameter
2-layer Llama would fit, but a step at seq_len 2048 costs about 3.3 TFLOP (~50 CPU-s here), beyond the smoke's
CI budget.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from pipeline.config import finetune_runs, load_preset, pretrain_runs
from pipeline.models.param_count import GPT2_VOCAB, LLAMA_VOCAB

PRETRAIN_STEPS = 2
LLAMA_LAYERS = 2
pytestmark = pytest.mark.paper_shape


def trainer_for(run_id: str, train, scratch: Path):
    """The training loop's Trainer (``pipeline.train.loop``) for ``train``."""
    import levanter
    from levanter.models.lm_model import compute_next_token_loss

    from pipeline.train.setup import optimizer_config, trainer_config
    from pipeline.train.trainer import UndonatedTrainer

    config = trainer_config(run_id, train, scratch)
    levanter.initialize(config)
    return UndonatedTrainer(config, optimizer_config(train).build(train.steps), compute_next_token_loss)


def random_batch(trainer, seq_len: int, key):
    import haliax as hax
    from haliax import Axis

    from pipeline.train.step_plan import causal_examples

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
    runs = pretrain_runs(config)
    return runs, finetune_runs(config, runs)


@pytest.mark.parametrize("run_id", ["wt103-small-gpt", "wt103-small-diffeq"])
def test_paper_small_shape_trains_and_resamples(paper, run_id, tmp_path):
    import jax.random as jrandom
    from haliax import Axis
    from haliax.partitioning import round_axis_for_partitioning

    from pipeline.models import build_initialised
    from pipeline.models.checkpoint import run_model_config
    from pipeline.train.finetune import resample, trainable_filter

    runs, finetunes = paper
    spec = runs[run_id]
    train = dataclasses.replace(spec.train, batch_size=1, steps=PRETRAIN_STEPS)
    model_key, data_key, training_key, lora_key, finetune_key = jrandom.split(jrandom.PRNGKey(0), 5)
    with trainer_for(run_id, train, tmp_path / "pretrain") as trainer:
        Vocab = round_axis_for_partitioning(Axis("vocab", GPT2_VOCAB), trainer.parameter_axis_mapping)
        state = trainer.initial_state(
            training_key,
            model_init=lambda: build_initialised(run_model_config(spec), Vocab, key=model_key, init=spec.model.init),
        )
        batch = random_batch(trainer, spec.model.seq_len, data_key)
        losses, changed, state = take_steps(trainer, state, batch, PRETRAIN_STEPS)
        model = state.model
    assert all(math.isfinite(loss) for loss in losses), losses
    assert changed == len(checksums(state.trainable_model)), "every parameter should move"
    if spec.model.family != "diffeq":
        return

    finetune = finetunes["ft-wt103-owt-diffeq18-n9-lora"]
    resampled = resample(finetune, model, lora_key)
    ft_train = dataclasses.replace(finetune.train, batch_size=1, steps=1)
    with trainer_for(finetune.run_id, ft_train, tmp_path / "finetune") as trainer:
        state = trainer.initial_state(finetune_key, model=resampled, is_trainable=trainable_filter(finetune)(resampled))
        losses, changed, state = take_steps(trainer, state, batch, 1)
    assert math.isfinite(losses[0]), losses
    assert changed > 0, "the LoRA adapters and embeddings should move"


@pytest.mark.parametrize("run_id", ["owt-llama1b-llama", "owt-llama1b-diffeq_llama"])
def test_llama_pair_compiles_at_paper_width(paper, run_id):
    """Compile-only: the run's train step at batch 1 with ``LLAMA_LAYERS`` layers, planned by XLA on this
    process's device; the state is built at the exact shape (every parameter counted, float32 parameters and
    AdamW's two moments per parameter)."""
    from pipeline.models.checkpoint import run_model_config
    from pipeline.models.param_count import count_params
    from pipeline.planning.plans import plan_train_step
    from pipeline.planning.workloads import Pretraining

    runs, _ = paper
    spec = runs[run_id]
    spec = dataclasses.replace(
        spec,
        model=dataclasses.replace(spec.model, num_layers=LLAMA_LAYERS),
        train=dataclasses.replace(spec.train, batch_size=1),
    )
    assert (spec.model.hidden_dim, spec.model.intermediate_dim, spec.model.seq_len) == (2048, 8192, 2048)
    plan = plan_train_step(Pretraining(spec), LLAMA_VOCAB, 1)
    print(run_id, {key: value / 1e9 for key, value in plan.items() if key.endswith("bytes")}, "GB")
    assert plan["parameters"] == plan["trainable_parameters"] == count_params(run_model_config(spec), LLAMA_VOCAB)
    assert plan["param_bytes"] == 4 * plan["parameters"]
    assert plan["optimizer_bytes"] >= 2 * plan["param_bytes"]
    assert plan["temp_bytes"] > 0 and plan["total_bytes"] > plan["param_bytes"] + plan["optimizer_bytes"]
