"""Paper-shape smoke: the paper's models at their exact shapes (GPT-2's 50257-entry vocabulary and seq_len 1024 for
the small pair, D = 20, S = 128; the Llama pair's width, hidden 2048, FF 8192, vocabulary 32000, seq_len 2048, at 2
layers) on CPU.

Compile-only where the claim is that the train step exists at that shape: GPT-small, the DiffEqFormer-small
resampled by the fine-tune's own ``resample`` to N' = 9 Euler steps with the paper's LoRA (rank 200, embeddings
trainable), and the Llama pair. Their train step is laid out on abstract state and compiled by the fit preview's
planner (``pipeline.planning.xla_plans``), nothing allocated: every parameter counted, AdamW's two float32 moments of
each trainable one (DiffEqFormer-Llama's hypernetwork holds 6.64 B parameters at any depth, 26.6 GB in float32, more
than a 24 GB CI machine; a step of the 2-layer Llama at seq_len 2048 costs about 3.3 TFLOP).

Real steps where arithmetic is the claim: DiffEqFormer-small's hypernetwork at the paper's D and S gives finite
losses and moves every parameter in two steps through the training loop's Levanter ``UndonatedTrainer`` (GPT-small
is Levanter's own GPT-2, whose arithmetic the shape does not change). Random tokens stand in for the tokenised
corpora: a step's shapes and arithmetic do not depend on the token values.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from pipeline.config import load_preset
from pipeline.models.param_count import GPT2_VOCAB, LLAMA_VOCAB
from pipeline.planning.grid import Grid

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


@pytest.fixture(scope="module")
def paper() -> Grid:
    return Grid.load(load_preset({"preset": "paper"}))


def test_the_paper_diffeqformer_small_trains_with_finite_losses_moving_every_parameter(paper, tmp_path):
    """Two steps: a parameter behind a zero-initialised layer gets its first gradient in the second. Every parameter
    has the paper's shape; the batch fills 128 of the 1,024 positions (a step at the full length, compiled: below)."""
    import jax.random as jrandom
    from haliax import Axis
    from haliax.partitioning import round_axis_for_partitioning

    from pipeline.models import build_initialised
    from pipeline.models.checkpoint import run_model_config

    spec = paper.workloads["wt103-small-diffeq"].run
    model_key, data_key, training_key = jrandom.split(jrandom.PRNGKey(0), 3)
    with trainer_for(spec.run_id, dataclasses.replace(spec.train, batch_size=1, steps=2), tmp_path) as trainer:
        Vocab = round_axis_for_partitioning(Axis("vocab", GPT2_VOCAB), trainer.parameter_axis_mapping)
        state = trainer.initial_state(
            training_key,
            model_init=lambda: build_initialised(run_model_config(spec), Vocab, key=model_key, init=spec.model.init),
        )
        before, batch, losses = (
            checksums(state.trainable_model),
            random_batch(trainer, 128, data_key),
            [],
        )
        for _ in range(2):
            result = trainer._jit_train_step_fn_no_hook(state, (batch,), {})
            state, losses = result.new_state, [*losses, float(result.loss)]
    assert all(math.isfinite(loss) for loss in losses), losses
    moved = [a != b for a, b in zip(before, checksums(state.trainable_model), strict=True)]
    assert all(moved), f"{moved.count(False)} of {len(moved)} parameters did not move"


@pytest.mark.parametrize(
    "run_id", ["wt103-small-gpt", "ft-wt103-owt-diffeq18-n9-lora", "owt-llama1b-llama", "owt-llama1b-diffeq_llama"]
)
def test_the_paper_train_step_compiles_at_its_shape(paper, run_id):
    """The run's train step at micro-batch 1 (the Llama pair with ``LLAMA_LAYERS`` layers), planned by XLA on this
    process's device; the state is built at the exact shape: every parameter counted (a pretraining run's as its
    model has them, in float32; a LoRA fine-tune's trainable ones fewer), AdamW's two float32 moments per trainable
    parameter."""
    from pipeline.models.checkpoint import run_model_config
    from pipeline.models.param_count import count_params
    from pipeline.planning.grid import Pretraining
    from pipeline.planning.xla_plans import plan_train_step

    workload = paper.workloads[run_id]
    if run_id.startswith("owt-llama1b"):
        run = dataclasses.replace(workload.run, model=dataclasses.replace(workload.run.model, num_layers=LLAMA_LAYERS))
        assert (run.model.hidden_dim, run.model.intermediate_dim, run.model.seq_len) == (2048, 8192, 2048)
        workload = dataclasses.replace(workload, run=run)
    vocab = LLAMA_VOCAB if run_id.startswith("owt-llama1b") else GPT2_VOCAB
    plan = plan_train_step(workload, 1)
    print(run_id, {key: value / 1e9 for key, value in plan.items() if key.endswith("bytes")}, "GB")
    if isinstance(workload, Pretraining):
        assert plan["parameters"] == plan["trainable_parameters"] == count_params(run_model_config(workload.run), vocab)
        assert plan["param_bytes"] == 4 * plan["parameters"]
    else:
        assert 0 < plan["trainable_parameters"] < plan["parameters"]
    assert plan["optimizer_bytes"] >= 2 * 4 * plan["trainable_parameters"]
    assert plan["temp_bytes"] > 0 and plan["total_bytes"] > plan["param_bytes"] + plan["optimizer_bytes"]
