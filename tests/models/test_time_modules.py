"""Time embedding, time-dependent linear maps and norms (paper Eq. 6, App. A, App. D.2)."""

import math

import equinox as eqx
import haliax as hax
import haliax.nn as hnn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pipeline.models.time_embedding import TimeMlp, features_axis, grid_times, time_features
from pipeline.models.time_layers import TimeLayerNorm, TimeLinear, TimeRmsNorm

S = hax.Axis("sinusoidal", 6)
D = hax.Axis("time_embed", 12)
In = hax.Axis("embed", 64)
Out = hax.Axis("mlp", 96)


def test_time_features_match_formula():
    e = time_features(0.37, S).array
    j = np.arange(S.size)
    freqs = np.exp(-math.log(10000.0) * j / S.size)
    expected = np.concatenate([[0.37], np.sin(1000 * 0.37 * freqs), np.cos(1000 * 0.37 * freqs)])
    assert e.shape == (2 * S.size + 1,)
    np.testing.assert_allclose(e, expected, rtol=1e-5, atol=1e-5)


def test_time_features_keep_batch_axes():
    times = hax.named(jnp.array([0.1, 0.5, 1.0]), "batch")
    e = time_features(times, S)
    assert e.axes == (hax.Axis("batch", 3), features_axis(S))
    np.testing.assert_allclose(e.array[1], time_features(0.5, S).array, rtol=1e-6)


def test_exact_euler_times_are_k_over_n():
    t = grid_times(hax.arange(hax.Axis("layers", 4)) + 1, 4, "exact", jnp.bfloat16)
    assert t.dtype == jnp.float32
    np.testing.assert_allclose(t.array, [0.25, 0.5, 0.75, 1.0])


def test_time_mlp_maps_time_to_embedding():
    mlp = TimeMlp.init(S, D, key=jax.random.PRNGKey(0))
    assert mlp.lin1.In == features_axis(S)
    h = mlp(0.5)
    assert h.axes == (D,)
    assert not np.allclose(h.array, mlp(0.75).array)


def test_time_linear_init_std_is_gpt2_like_and_applies_w_and_b():
    lin = TimeLinear.init(In, Out, S, D, key=jax.random.PRNGKey(1), initializer_range=0.02)
    stds = [float(lin.weights_at(t)[0].array.std()) for t in (0.1, 0.4, 0.7, 1.0)]
    assert 0.012 < np.mean(stds) < 0.028
    weight, bias = lin.weights_at(0.3)
    assert weight.axes == (In, Out)
    assert float(jnp.abs(bias.array).max()) < 1e-2
    x = hax.random.normal(jax.random.PRNGKey(2), (hax.Axis("position", 5), In))
    expected = x.array @ weight.array + bias.array
    np.testing.assert_allclose(lin.at(0.3)(x).rearrange(("position", "mlp")).array, expected, rtol=1e-5, atol=1e-6)
    assert not np.allclose(lin.weights_at(0.3)[0].array, lin.weights_at(0.9)[0].array)


def test_time_linear_at_scales_weight_and_bias():
    lin = TimeLinear.init(In, Out, S, D, key=jax.random.PRNGKey(3))
    plain, scaled = lin.at(0.5), lin.at(0.5, scale=0.25)
    assert isinstance(scaled, hnn.Linear)
    np.testing.assert_allclose(scaled.weight.array, 0.25 * plain.weight.array, rtol=1e-6)
    np.testing.assert_allclose(scaled.bias.array, 0.25 * plain.bias.array, rtol=1e-6)


def test_time_linear_out_first_orders_axes_like_llama():
    lin = TimeLinear.init(In, Out, S, D, key=jax.random.PRNGKey(4), out_first=True, use_bias=False)
    weight, bias = lin.weights_at(0.5)
    assert weight.axes == (Out, In)
    assert bias is None


def test_shared_mlp_variant_has_no_own_mlp():
    shared = TimeMlp.init(S, D, key=jax.random.PRNGKey(5))
    lin = TimeLinear.init(In, Out, S, D, key=jax.random.PRNGKey(6), shared_mlp=shared)
    assert lin.mlp is None
    with pytest.raises(ValueError, match="shared_mlp"):
        lin.weights_at(0.5)
    assert lin.weights_at(0.5, shared)[0].axes == (In, Out)


@pytest.mark.parametrize("norm_type, plain_type", [(TimeLayerNorm, hnn.LayerNorm), (TimeRmsNorm, hnn.RmsNorm)])
def test_time_norm_starts_as_plain_norm_then_depends_on_t(norm_type, plain_type):
    norm = norm_type.init(In, S, D, key=jax.random.PRNGKey(7))
    x = hax.random.normal(jax.random.PRNGKey(8), (hax.Axis("position", 3), In)) * 3.0 + 1.0
    plain = plain_type.init(In, eps=norm.eps)
    assert isinstance(norm.at(0.5), plain_type)
    np.testing.assert_allclose(norm.at(0.5)(x).array, plain(x).array, rtol=1e-6, atol=1e-6)
    perturbed = hax.random.normal(jax.random.PRNGKey(9), norm.scale_proj.axes)
    norm = eqx.tree_at(lambda n: n.scale_proj, norm, perturbed)
    scale_a, _ = norm.weights_at(0.2)
    scale_b, _ = norm.weights_at(0.8)
    assert not np.allclose(scale_a.array, scale_b.array)
