"""Step resampling (paper §6.2): discretize(model, N') and LoRA on the discrete model."""

import equinox as eqx
import jax
import numpy as np
import pytest
from levanter.lora import LoraConfig, LoraLinear, LowRankLinear, loraize
from models_testkit import (
    VOCAB,
    causal_activations,
    causal_logits,
    init_prng,
    nodes_of,
    random_tokens,
    tiny_config,
    tiny_model,
)

import pipeline.models as pm


@eqx.filter_jit
def discrete_activations(model, input_ids, num_steps):
    return causal_activations(pm.discretize(model, num_steps), input_ids)


@pytest.mark.parametrize(
    "family, overrides",
    [("diffeq", {}), ("diffeq", {"shared_time_mlp": True}), ("diffeq_llama", {})],
    ids=["gpt", "gpt-shared-mlp", "llama"],
)
def test_discretize_with_the_trained_steps_reproduces_the_model(family, overrides):
    model = tiny_model(family, **overrides)
    ids = random_tokens(0, model.Pos)
    discrete = pm.discretize(model, model.config.num_layers)
    assert discrete.config.num_steps == model.config.num_layers
    assert discrete.config.source == model.config
    if family == "diffeq_llama":  # Llama's untied head, shared (GPT ties its head to the embeddings)
        assert discrete.lm_head is model.lm_head
    assert discrete.get_lm_head().axes == model.get_lm_head().axes
    continuous, resampled = causal_logits(model, ids), causal_logits(discrete, ids)
    assert np.abs(continuous).max() > 0.01
    assert np.abs(resampled - continuous).max() <= 1e-5
    hidden = causal_activations(model, ids)
    assert np.abs(hidden).max() > 1.0
    assert np.abs(causal_activations(discrete, ids) - hidden).max() <= 1e-5


def test_resampled_models_differ_and_approach_the_ode_limit():
    """Euler's O(dt) regime needs dt below the period of e(t)'s fastest sinusoid, sin(1000·t) (App. A):
    N' in the hundreds. Below that, N' ≠ L gives a clearly different model; above it, the gap to a fine
    reference solve (N = 4096) shrinks as N' doubles."""
    model = tiny_model("diffeq")
    ids = random_tokens(1, model.Pos)
    L = model.config.num_layers
    at_l, at_2l = discrete_activations(model, ids, L), discrete_activations(model, ids, 2 * L)
    assert np.abs(at_2l - at_l).max() > 1e-2
    reference = discrete_activations(model, ids, 4096)
    gaps = [np.abs(discrete_activations(model, ids, n) - reference).max() for n in (512, 1024, 2048)]
    assert gaps[0] > gaps[1] > gaps[2]
    assert gaps[2] < 0.6 * gaps[0]


def shapes(tree) -> list[tuple]:
    return [(x.shape, x.dtype) for x in jax.tree_util.tree_leaves(tree) if hasattr(x, "shape")]


@pytest.mark.parametrize("family", ["diffeq", "diffeq_llama"])
def test_discrete_config_builds_the_same_structure_as_discretize(family):
    """The discrete config's ``build`` is the template Levanter loads discretised checkpoints into."""
    discrete = pm.discretize(tiny_model(family), 5)
    template = eqx.filter_eval_shape(discrete.config.build, VOCAB, key=jax.random.PRNGKey(0))
    assert jax.tree_util.tree_structure(template) == jax.tree_util.tree_structure(discrete)
    assert shapes(template) == shapes(discrete)
    assert discrete.transformer.blocks.Block.size == 5


def test_discretize_rejects_other_models():
    with pytest.raises(TypeError, match="DiffEqFormer"):
        pm.discretize(eqx.filter_eval_shape(tiny_config("shared").build, VOCAB, key=jax.random.PRNGKey(0)), 3)
    with pytest.raises(ValueError, match="positive"):
        pm.discretize(tiny_model("diffeq"), 0)


@pytest.mark.parametrize(
    "family, targets, per_block", [("diffeq", pm.GPT_LORA_TARGETS, 4), ("diffeq_llama", pm.LLAMA_LORA_TARGETS, 7)]
)
def test_lora_inits_start_at_the_base_model(family, targets, per_block):
    """Levanter's ``loraize`` draws B randomly (the model moves); both inits of ``fidelity.lora_init`` start at the
    base model: B = 0 exactly, or A, B ~ 1e-6·N(0,1) (docs/paper.md#lora) within 1e-6 of the logits."""
    model = tiny_model(family)
    discrete = pm.discretize(model, 6)
    lora_config = LoraConfig(r=4, target_modules=list(targets))
    with init_prng():
        lora = eqx.filter_jit(lambda m, key: loraize(m, lora_config, key=key))(discrete, jax.random.PRNGKey(3))
        zeroed, reference = (pm.init_lora(lora, scheme, jax.random.PRNGKey(4)) for scheme in pm.LORA_INITS[::-1])
    wrapped = nodes_of(lora, LoraLinear)
    assert len(wrapped) == per_block
    assert wrapped[0].lora.lora_A.weight.axes[0].size == 6
    ids = random_tokens(2, model.Pos)
    base = causal_logits(discrete, ids)
    assert np.abs(causal_logits(lora, ids) - base).max() > 1e-4
    adapters = nodes_of(zeroed, LowRankLinear)
    assert all(not np.any(adapter.lora_B.weight.array) for adapter in adapters)
    assert all(np.any(adapter.lora_A.weight.array) for adapter in adapters)
    np.testing.assert_array_equal(causal_logits(zeroed, ids), base)
    for adapter in nodes_of(reference, LowRankLinear):
        for weight in (adapter.lora_A.weight.array, adapter.lora_B.weight.array):
            assert 0.8e-6 < np.std(weight) < 1.2e-6
    assert np.abs(causal_logits(reference, ids) - base).max() <= 1e-6
