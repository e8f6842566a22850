"""Fine-tuning and persistence: LoRA on the discretised model, round trips through Levanter checkpoints."""

import equinox as eqx
import jax
import numpy as np
import pytest
from levanter.checkpoint import load_checkpoint, save_checkpoint
from levanter.lora import LoraConfig, lora_trainable_params_filter, loraize
from models_testkit import VOCAB, batch_example, causal_logits, init_prng, random_tokens, tiny_model, train

import pipeline.models as pm


def test_lora_fine_tune_of_the_discretised_model_trains_only_the_adapters():
    discrete = pm.discretize(tiny_model("diffeq"), 4)
    lora_config = LoraConfig(r=4, target_modules=list(pm.GPT_LORA_TARGETS))
    with init_prng():
        wrapped = loraize(discrete, lora_config, key=jax.random.PRNGKey(8))
        lora = pm.init_lora(wrapped, "levanter", jax.random.PRNGKey(9))
    example = batch_example(9, discrete.Pos)
    trainable = lora_trainable_params_filter(lora)
    trained, losses = train(lora, example, steps=6, trainable=trainable, learning_rate=1e-2)
    assert losses[-1] < losses[0] - 0.05
    before, after = (m.transformer.blocks.stacked.attn.c_attn for m in (lora, trained))
    np.testing.assert_array_equal(after.wrapped.weight.array, before.wrapped.weight.array)
    assert np.any(after.lora.lora_B.weight.array)


@pytest.mark.parametrize("family", ["diffeq", "diffeq_llama", "discrete"])
def test_levanter_checkpoint_round_trip(family, tmp_path):
    if family == "discrete":
        model = pm.discretize(tiny_model("diffeq"), 5)
    else:
        model = tiny_model(family)
    save_checkpoint(model, step=3, checkpoint_path=tmp_path / "ckpt")
    template = eqx.filter_eval_shape(model.config.build, VOCAB, key=jax.random.PRNGKey(0))
    mesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(1, 1), ("data", "model"))
    loaded = load_checkpoint(template, tmp_path / "ckpt", discover_latest=False, mesh=mesh, axis_mapping={})
    saved_leaves = jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_array))
    loaded_leaves = jax.tree_util.tree_leaves(eqx.filter(loaded, eqx.is_array))
    assert len(saved_leaves) == len(loaded_leaves)
    for a, b in zip(saved_leaves, loaded_leaves, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    ids = random_tokens(10, model.Pos)
    np.testing.assert_array_equal(causal_logits(loaded, ids), causal_logits(model, ids))
