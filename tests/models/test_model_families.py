"""Every model family: causality, masks, determinism, parameter counts, configs and the factory."""

import dataclasses

import draccus
import equinox as eqx
import haliax as hax
import jax
import numpy as np
import pytest
from levanter.layers.attention import AttentionMask
from levanter.models.gpt2 import Gpt2Config, Gpt2LMHeadModel
from levanter.models.llama import LlamaConfig, LlamaLMHeadModel
from levanter.models.lm_model import LmConfig
from levanter.utils.tree_utils import inference_mode
from models_testkit import (
    TINY_SHAPE,
    VOCAB,
    build,
    causal_activations,
    causal_logits,
    default_logits,
    nodes_of,
    random_tokens,
    tiny_config,
    tiny_model,
)

import pipeline.models as pm
from pipeline.models.param_count import count_leaves
from pipeline.models.time_embedding import TimeMlp

FAMILIES = list(pm.FAMILIES)
OUR_FAMILIES = [family for family in FAMILIES if family not in ("gpt", "llama")]


@pytest.mark.parametrize("family", FAMILIES)
def test_changing_token_i_never_changes_earlier_logits(family):
    model = tiny_model(family)
    Pos = model.Pos
    ids = random_tokens(0, Pos)
    Batch = hax.Axis("batch", 3)
    changed = [ids.at[Pos, i].set((ids[Pos, i] + 1) % VOCAB.size) for i in (0, 7, 15)]
    logits = causal_logits(model, hax.stack(Batch, [ids] * 3))
    logits_changed = causal_logits(model, hax.stack(Batch, changed))
    for b, i in enumerate((0, 7, 15)):
        np.testing.assert_allclose(logits_changed[b, :i], logits[b, :i], atol=1e-6, err_msg=family)
        assert np.abs(logits_changed[b, i:] - logits[b, i:]).max() > 1e-5, family


@pytest.mark.parametrize("family", OUR_FAMILIES)
def test_default_mask_is_causal_and_explicit_masks_are_honoured(family):
    model = tiny_model(family)
    Pos = model.Pos
    ids = random_tokens(1, Pos)
    np.testing.assert_array_equal(default_logits(model, ids), causal_logits(model, ids))
    segments = (hax.arange(Pos) >= 8).astype(np.int32)
    mask = AttentionMask.causal().with_segment_ids(segments)
    changed = ids.at[Pos, 2].set((ids[Pos, 2] + 1) % VOCAB.size)
    masked_logits = eqx.filter_jit(lambda m, ids, mask: m(ids, mask).array)
    before, after = masked_logits(model, ids, mask), masked_logits(model, changed, mask)
    np.testing.assert_allclose(after[8:], before[8:], atol=1e-6)
    assert np.abs(after[2:8] - before[2:8]).max() > 1e-5


@pytest.mark.parametrize("family", FAMILIES)
def test_parameter_count_equals_sum_of_leaf_sizes(family):
    model = tiny_model(family)
    config = tiny_config(family)
    assert pm.count_params(config, VOCAB.size) == count_leaves(eqx.filter(model, eqx.is_array))


@pytest.mark.parametrize("family", FAMILIES)
def test_same_key_same_model_other_key_other_model(family):
    a, b, c = (build(tiny_config(family), seed) for seed in (0, 0, 1))
    leaves_a, leaves_b, leaves_c = (jax.tree_util.tree_leaves(eqx.filter(m, eqx.is_array)) for m in (a, b, c))
    assert all(np.array_equal(x, y) for x, y in zip(leaves_a, leaves_b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(leaves_a, leaves_c, strict=True))
    ids = random_tokens(2, a.Pos)
    np.testing.assert_array_equal(causal_logits(a, ids), causal_logits(b, ids))


def test_dropout_follows_the_key():
    model = tiny_model("diffeq", resid_pdrop=0.3, embed_pdrop=0.3)
    ids = random_tokens(3, model.Pos)
    run = eqx.filter_jit(lambda m, ids, key: m(ids, key=key).array)
    k1, k2 = jax.random.PRNGKey(10), jax.random.PRNGKey(11)
    np.testing.assert_array_equal(run(model, ids, k1), run(model, ids, k1))
    assert not np.allclose(run(model, ids, k1), run(model, ids, k2))
    assert not np.allclose(run(model, ids, k1), default_logits(inference_mode(model, True), ids))


def test_shared_time_mlp_keeps_one_mlp_for_all_weights():
    own, shared = (
        eqx.filter_eval_shape(tiny_config("diffeq", shared_time_mlp=flag).build, VOCAB, key=jax.random.PRNGKey(0))
        for flag in (False, True)
    )
    assert len(nodes_of(own, TimeMlp)) == 6  # four linears (QKV, attn out, FF in, FF out) and two norms
    assert len(nodes_of(shared, TimeMlp)) == 1
    assert count_leaves(shared) < count_leaves(own)


def test_shared_ode_is_the_diffeq_euler_solve_with_one_set_of_weights():
    """docs/paper.md#weight-sharing: x_l = x_{l-1} + dt·(Attn(LN1 x) + FF(LN2 x)), dt = 1/L, l = 1..L, every step
    with the same weights (a hand-written Euler loop of DiffEqFormer's parallel block), then the final LayerNorm."""
    model = tiny_model("shared_ode")
    block, num_layers = model.transformer.block, model.config.num_layers
    ids = random_tokens(7, model.Pos)
    mask = AttentionMask.causal()

    @eqx.filter_jit
    def euler_loop(model, ids):
        x = model.embeddings.embed(ids, pos_ids=hax.arange(model.Pos), key=None)
        for _ in range(num_layers):
            x = x + (block.attn(block.ln_1(x), mask, None, key=None) + block.mlp(block.ln_2(x), key=None)) / num_layers
        return model.transformer.ln_f(x).array

    expected = euler_loop(model, ids)
    np.testing.assert_allclose(causal_activations(model, ids), expected, atol=1e-5)
    unit_step = eqx.tree_at(lambda m: m.transformer.block, model, dataclasses.replace(block, step=1.0))
    assert np.abs(causal_activations(unit_step, ids) - expected).max() > 1e-2


def test_factory_builds_each_family():
    expected = {
        "gpt": Gpt2Config,
        "llama": LlamaConfig,
        "diffeq": pm.DiffEqGptConfig,
        "diffeq_llama": pm.DiffEqLlamaConfig,
        "shared": pm.SharedGptConfig,
        "shared_ode": pm.SharedOdeGptConfig,
    }
    for family, config_type in expected.items():
        config = tiny_config(family)
        assert type(config) is config_type
        assert (config.seq_len, config.hidden_dim, config.num_heads, config.num_layers) == tuple(
            TINY_SHAPE[k] for k in ("seq_len", "hidden_dim", "num_heads", "num_layers")
        )
    assert isinstance(tiny_model("gpt"), Gpt2LMHeadModel)
    assert isinstance(tiny_model("llama"), LlamaLMHeadModel)


def test_factory_options():
    gpt = pm.build_model_config("gpt", **TINY_SHAPE, dropout=0.1)
    assert (gpt.resid_pdrop, gpt.embed_pdrop, gpt.attn_pdrop) == (0.1, 0.1, 0.1)
    diffeq = pm.build_model_config(
        "diffeq", **TINY_SHAPE, dropout=0.1, time_embed_dim=96, sinusoidal_dim=128, shared_time_mlp=True
    )
    assert (diffeq.time_embed_dim, diffeq.sinusoidal_dim, diffeq.shared_time_mlp) == (96, 128, True)
    assert diffeq.resid_pdrop == 0.1
    llama = pm.build_model_config("diffeq_llama", **TINY_SHAPE, intermediate_dim=80, time_embed_dim=4)
    assert (llama.intermediate_dim, llama.num_kv_heads, llama.time_embed_dim) == (80, 4, 4)
    assert pm.build_model_config("llama", **TINY_SHAPE).intermediate_dim == 4 * TINY_SHAPE["hidden_dim"]


def test_factory_rejects_unknown_families_and_foreign_options():
    with pytest.raises(ValueError, match="valid names are: gpt, shared, shared_ode, diffeq, llama, diffeq_llama"):
        pm.build_model_config("transformer", **TINY_SHAPE)
    with pytest.raises(ValueError, match="time_embed_dim"):
        pm.build_model_config("gpt", **TINY_SHAPE, time_embed_dim=20)
    with pytest.raises(ValueError, match="shared_time_mlp"):
        pm.build_model_config("shared", **TINY_SHAPE, shared_time_mlp=False)
    with pytest.raises(ValueError, match="intermediate_dim"):
        pm.build_model_config("diffeq", **TINY_SHAPE, intermediate_dim=64)
    with pytest.raises(ValueError, match="dropout"):
        pm.build_model_config("llama", **TINY_SHAPE, dropout=0.1)


def test_configs_are_registered_and_round_trip_through_draccus():
    choices = LmConfig.get_known_choices()
    for name in (
        "diffeq_gpt",
        "diffeq_llama",
        "shared_gpt",
        "shared_ode_gpt",
        "discrete_diffeq_gpt",
        "discrete_diffeq_llama",
    ):
        assert name in choices
    configs = [
        tiny_config("diffeq", shared_time_mlp=True),
        tiny_config("diffeq_llama"),
        tiny_config("shared"),
        tiny_config("shared_ode"),
        pm.DiscreteDiffEqGptConfig(source=tiny_config("diffeq"), num_steps=7),
        pm.DiscreteDiffEqLlamaConfig(source=tiny_config("diffeq_llama"), num_steps=5),
    ]
    for config in configs:
        assert draccus.decode(LmConfig, draccus.encode(config, LmConfig)) == config


def test_flops_per_token_equal_a_gpt_of_the_same_depth():
    gpt = tiny_config("gpt")
    for family in ("diffeq", "shared", "shared_ode"):
        assert tiny_config(family).flops_per_token(VOCAB.size) == gpt.flops_per_token(VOCAB.size)
    llama = tiny_config("llama")
    assert tiny_config("diffeq_llama").flops_per_token(VOCAB.size) == llama.flops_per_token(VOCAB.size)
    discrete = pm.DiscreteDiffEqGptConfig(source=tiny_config("diffeq"), num_steps=6)
    deeper = dataclasses.replace(gpt, num_layers=6)
    assert discrete.flops_per_token(VOCAB.size) == deeper.flops_per_token(VOCAB.size)


@pytest.mark.parametrize("family", OUR_FAMILIES)
def test_resize_vocab(family):
    model = tiny_model(family).resize_vocab(80, key=jax.random.PRNGKey(0))
    assert model.Vocab.size == 80
    assert causal_logits(model, random_tokens(4, model.Pos)).shape == (TINY_SHAPE["seq_len"], 80)
