"""The authors' choices that move the paper's numbers (docs/paper.md#the-authors-code), pinned by value."""

import dataclasses

import equinox as eqx
import haliax as hax
import jax
import numpy as np
import pytest
from levanter.layers.attention import AttentionMask
from levanter.utils.jax_utils import leaf_key_paths
from models_testkit import VOCAB, init_prng, nodes_of, tiny_config, tiny_model

import pipeline.models as pm
from pipeline.models.init import reference_linears
from pipeline.models.time_layers import CALIBRATION_TIMES, TimeLinear
from pipeline.train.decay import decay_mask


@eqx.filter_jit
def _reference_model(config, key):
    return pm.build_initialised(config, VOCAB, key=key, init="reference")


def reference_model(family: str, **overrides):
    with init_prng():
        return _reference_model(tiny_config(family, **overrides), jax.random.PRNGKey(0))


@eqx.filter_jit
def _rms_of_generated_weights(keys, Sinusoidal, TimeEmbed):
    In, Out = hax.Axis("embed", 16), hax.Axis("mlp", 24)

    def one(key):
        k_init, k_reference = jax.random.split(key)
        linear = reference_linears(TimeLinear.init(In, Out, Sinusoidal, TimeEmbed, key=k_init), k_reference)
        weight, _ = linear.weights_at(hax.named(CALIBRATION_TIMES, "time"))
        return hax.mean(hax.square(weight)).array

    return jax.numpy.sqrt(jax.vmap(one)(keys).mean())


@pytest.mark.parametrize(
    "sinusoidal, time_embed, expected, tolerance",
    [(128, 20, 0.0008, 0.15), (128, 96, 0.0044, 0.10), (256, 100, 0.0066, 0.10)],
)
def test_reference_init_starts_w_t_tiny(sinusoidal, time_embed, expected, tolerance):
    """docs/paper.md#initialisation: with every Linear of the hypernetwork at N(0, 0.02²), W(t) starts at std ≈ 0.0008
    / 0.0044 / 0.0066 for (S, D) = (128, 20) / (128, 96) / (256, 100), not at 0.02. RMS over 24 draws and the times
    k/16; measured 0.00090, 0.00443, 0.00668 (one draw of D = 20 varies by ±11 %, hence its wider band)."""
    with init_prng():
        keys = jax.random.split(jax.random.PRNGKey(0), 24)
        axes = hax.Axis("sinusoidal", sinusoidal), hax.Axis("time_embed", time_embed)
        rms = float(_rms_of_generated_weights(keys, *axes))
    assert abs(rms / expected - 1) <= tolerance


@pytest.mark.parametrize(
    "family, token_std, position_std",
    [
        ("gpt", 0.02, 0.01),
        ("shared", 0.02, 0.01),
        ("shared_ode", 0.02, 0.01),
        ("diffeq", 0.02, 0.01),
        ("llama", 1.0, None),
        ("diffeq_llama", 1.0, None),
    ],
)
def test_reference_init_of_embeddings_and_linears(family, token_std, position_std):
    """docs/paper.md#initialisation: GPT token/position embeddings N(0,1)·0.02/·0.01, Llama token embeddings N(0,1);
    every Linear N(0,0.02²) with zero bias, the hypernetwork's included; F_b ~ 1e-4·N(0,1)."""
    model = reference_model(family)
    assert np.std(model.embeddings.token_embeddings.weight.array) == pytest.approx(token_std, rel=0.1)
    if position_std is not None:
        assert np.std(model.embeddings.position_embeddings.weight.array) == pytest.approx(position_std, rel=0.1)
    linears = nodes_of(model, hax.nn.Linear)
    weights = np.concatenate([np.ravel(linear.weight.array) for linear in linears])
    assert np.std(weights) == pytest.approx(0.02, rel=0.05)
    assert all(linear.bias is None or not np.any(linear.bias.array) for linear in linears)
    for time_linear in nodes_of(model, TimeLinear):
        if time_linear.bias_proj is not None:
            assert np.std(time_linear.bias_proj.array) == pytest.approx(1e-4, rel=0.3)


def decayed_paths(model) -> set[str]:
    mask = decay_mask(model)
    paths = leaf_key_paths(model, is_leaf=eqx.is_array)
    return {
        path
        for path, decayed in zip(jax.tree_util.tree_leaves(paths), jax.tree_util.tree_leaves(mask), strict=True)
        if decayed
    }


GPT_BASELINE_DECAYED = {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"}
EMBEDDINGS = {"embeddings.token_embeddings.weight", "embeddings.position_embeddings.weight"}


@pytest.mark.parametrize(
    "family, expected",
    [
        ("gpt", {f"transformer.blocks.stacked.{p}" for p in GPT_BASELINE_DECAYED} | EMBEDDINGS),
        ("shared", {f"transformer.block.{p}" for p in GPT_BASELINE_DECAYED} | EMBEDDINGS),
        ("shared_ode", {f"transformer.block.{p}" for p in GPT_BASELINE_DECAYED} | EMBEDDINGS),
        (
            "llama",
            {
                f"transformer.layers.stacked.{p}.weight"
                for p in (
                    "self_attn.q_proj",
                    "self_attn.k_proj",
                    "self_attn.v_proj",
                    "self_attn.o_proj",
                    "mlp.gate_proj",
                    "mlp.up_proj",
                    "mlp.down_proj",
                )
            }
            | {"embeddings.token_embeddings.weight"},
        ),
        ("diffeq", EMBEDDINGS),
    ],
)
def test_family_decay_mask_is_the_authors_pretraining_set_of_parameters(family, expected):
    """docs/paper.md#weight-decay: baselines decay attention/MLP weight matrices and embeddings; DiffEqFormer-GPT only
    its embeddings."""
    assert decayed_paths(reference_model(family)) == expected


def test_family_decay_mask_decays_all_of_diffeq_llama_and_the_resampled_gpt_embeddings():
    """docs/paper.md#weight-decay: DiffEqFormer-Llama decays every parameter; a resampled DiffEqFormer-GPT decays as
    its source."""
    model = reference_model("diffeq_llama")
    assert decayed_paths(model) == set(jax.tree_util.tree_leaves(leaf_key_paths(model, is_leaf=eqx.is_array)))
    assert decayed_paths(pm.discretize(reference_model("diffeq"), 4)) == EMBEDDINGS


@eqx.filter_jit
def _last_block_update(model, num_steps: int, delta, x):
    """The change of the last block's (t = 1) increment of the N'-step model when mlp.c_proj.weight gets + delta."""
    blocks = pm.discretize(model, num_steps).transformer.blocks
    block = blocks.get_layer(num_steps - 1)
    c_proj = block.mlp.c_proj
    updated = eqx.tree_at(lambda b: b.mlp.c_proj, block, dataclasses.replace(c_proj, weight=c_proj.weight + delta))
    return (updated.increment(x, AttentionMask.causal()) - block.increment(x, AttentionMask.causal())).array


def test_an_update_to_an_output_projection_acts_with_the_strength_dt():
    """docs/paper.md#resampled-model: dt' multiplies the resampled block's output, so the same update ΔW on an output
    projection changes the block's output by dt'·ΔW·h at every N' (with dt' folded into W it would change it by ΔW·h:
    N'× stronger)."""
    model = tiny_model("diffeq")
    config = model.config
    delta = hax.random.normal(jax.random.PRNGKey(5), (config.Mlp, config.Embed)) * 0.01
    x = hax.random.normal(jax.random.PRNGKey(6), (config.Pos, config.Embed))
    per_dt = [_last_block_update(model, n, delta, x) * n for n in (9, 24)]
    assert np.abs(per_dt[0]).max() > 1e-3
    np.testing.assert_allclose(per_dt[1], per_dt[0], rtol=1e-3, atol=1e-6)


def test_reference_llama_layer_chains_its_norms():
    """docs/paper.md#llama-layer: a = RMSNorm1_t(x); f = Attn_t(a) + SwiGLU_t(RMSNorm2_t(a)); the norms have a shift
    and eps 1e-6. The first norm's F_w, F_b are drawn non-zero here (at init RMSNorm2(RMSNorm1(x)) = RMSNorm2(x))."""
    config = pm.build_model_config(
        "diffeq_llama", seq_len=16, hidden_dim=32, num_heads=4, num_layers=3, time_embed_dim=8, sinusoidal_dim=8
    )
    assert (config.chained_norms, config.norm_shift, config.layer_norm_epsilon) == (True, True, 1e-6)
    model = tiny_model("diffeq_llama")
    norm = model.transformer.field.attn_norm
    assert norm.shift_proj is not None
    k_scale, k_shift = jax.random.split(jax.random.PRNGKey(8))
    norm = dataclasses.replace(
        norm,
        scale_proj=hax.random.normal(k_scale, norm.scale_proj.axes),
        shift_proj=hax.random.normal(k_shift, norm.shift_proj.axes),
    )
    field = dataclasses.replace(model.transformer.field, attn_norm=norm)
    block = field.at(0.5)
    assert block.attn_norm.eps == 1e-6
    x = hax.random.normal(jax.random.PRNGKey(7), (config.Pos, config.Embed))
    a = block.attn_norm(x)
    attended = block.self_attn(a, AttentionMask.causal())
    chained, side_by_side = (attended + block.mlp(block.mlp_norm(y)) for y in (a, x))
    assert np.abs(chained.array - side_by_side.array).max() > 1e-3
    np.testing.assert_allclose(block.increment(x, AttentionMask.causal()).array, chained.array, atol=1e-5)


def test_reference_llama_final_norm_has_the_authors_eps():
    """The authors' final RMSNorm takes LlamaConfig's eps 1e-5 (their layer norms 1e-6): the model's, its resampled
    form's and the resampled template's (which loads resampled checkpoints)."""
    model = tiny_model("diffeq_llama")
    assert model.transformer.norm.eps == 1e-5
    assert model.transformer.field.at(0.5).attn_norm.eps == 1e-6
    resampled = eqx.filter_eval_shape(pm.discretize, model, 2)
    assert resampled.transformer.norm.eps == 1e-5
    template_config = pm.DiscreteDiffEqLlamaConfig(source=model.config, num_steps=2)
    template = eqx.filter_eval_shape(template_config.build, VOCAB, key=jax.random.PRNGKey(0))
    assert template.transformer.norm.eps == 1e-5


def test_reference_init_starts_the_two_gpt_norms_alike():
    """The authors' DiffEqFormer-GPT block draws both time-dependent norms from one key; their Llama layer from two."""
    gpt = reference_model("diffeq").transformer.field
    for first, second in zip(jax.tree_util.tree_leaves(gpt.ln_1), jax.tree_util.tree_leaves(gpt.ln_2), strict=True):
        np.testing.assert_array_equal(first, second)
    llama = reference_model("diffeq_llama").transformer.field
    assert not np.array_equal(llama.attn_norm.mlp.lin1.weight.array, llama.mlp_norm.mlp.lin1.weight.array)
