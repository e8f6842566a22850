"""Time-dependent layers of DiffEqFormer (paper Eq. 6, §4.2, App. A, App. D.2): the linear map W(t), b(t), the
LayerNorm / RMSNorm with time-dependent weights (App. A), and the builder of one vector field's layers."""

import dataclasses
from typing import Any, ClassVar

import equinox as eqx
import haliax as hax
import haliax.nn as hnn
import jax.numpy as jnp
import jax.random as jrandom
import numpy as np
from haliax import Axis, AxisSpec, NamedArray
from haliax.nn.normalization import LayerNormBase

from .time_embedding import TimeMlp

BIAS_INIT_STD = 1e-4
"""F_b ~ N(0, 1)·1e-4 (authors' reference code)."""
CALIBRATION_TIMES = np.arange(1, 17, dtype=np.float32) / 16
"""Times at which |h(t)| is measured to set the projection's init scale (see ``TimeLinear.init``)."""


def calibrated_projection_std(mlp: TimeMlp, initializer_range: float):
    """Std σ_P of the projection h(t) → W(t) giving W(t) std ``initializer_range`` at init: with
    W_ij(t) = Σ_d h_d(t) P_dij, Var W_ij = |h(t)|² σ_P², so σ_P = initializer_range / sqrt(mean_t |h(t)|²) over
    ``CALIBRATION_TIMES``."""
    h = mlp(hax.named(jnp.asarray(CALIBRATION_TIMES), "calibration"))
    mean_sq_norm = hax.mean(hax.sum(hax.square(h), axis=mlp.TimeEmbed)).array
    return initializer_range / jnp.sqrt(mean_sq_norm)


def hidden_at(layer, t, shared_mlp: TimeMlp | None) -> NamedArray:
    """h(t) of a time-dependent ``layer``: from its own ``mlp``, or else from App. D.2's ``shared_mlp``."""
    mlp = layer.mlp if layer.mlp is not None else shared_mlp
    if mlp is None:
        raise ValueError(f"This {type(layer).__name__} has no MLP of its own; pass the model's shared_mlp.")
    return mlp(t)


class TimeLinear(eqx.Module):
    """W(t) = P·h(t) + c (In×Out) and b(t) = h(t)·F_b (Out), h(t) = MLP(e(t)) (Eq. 6, App. A). ``mlp`` is this
    weight's own, or None with App. D.2's ``shared_mlp`` passed in."""

    mlp: TimeMlp | None
    proj: hnn.Linear
    bias_proj: NamedArray | None
    In: AxisSpec = eqx.field(static=True)
    Out: AxisSpec = eqx.field(static=True)

    @staticmethod
    def init(
        In: AxisSpec,
        Out: AxisSpec,
        Sinusoidal: Axis,
        TimeEmbed: Axis,
        *,
        key,
        initializer_range: float = 0.02,
        use_bias: bool = True,
        out_first: bool = False,
        shared_mlp: TimeMlp | None = None,
        time_precision: str = "compute",
    ) -> "TimeLinear":
        """P calibrated against the MLP in use (``calibrated_projection_std``), c = 0 (the ``levanter`` scheme);
        ``out_first`` orders W's axes like the ``hnn.Linear`` it becomes (False: GPT-2, True: Llama)."""
        k_mlp, k_proj, k_bias = jrandom.split(key, 3)
        mlp = None
        if shared_mlp is None:
            mlp = TimeMlp.init(Sinusoidal, TimeEmbed, key=k_mlp, time_precision=time_precision)
        std = calibrated_projection_std(mlp if mlp is not None else shared_mlp, initializer_range)
        weight_axes = hax.concat_axis_specs(Out, In) if out_first else hax.concat_axis_specs(In, Out)
        proj_weight = hax.random.truncated_normal(k_proj, hax.concat_axis_specs(weight_axes, TimeEmbed), -3, 3)
        proj = hnn.Linear(weight=proj_weight * std, bias=hax.zeros(weight_axes), In=TimeEmbed, Out=weight_axes)
        bias_proj = None
        if use_bias:
            bias_proj = hax.random.normal(k_bias, hax.concat_axis_specs(TimeEmbed, Out)) * BIAS_INIT_STD
        return TimeLinear(mlp, proj, bias_proj, In, Out)

    def weights_at(self, t, shared_mlp: TimeMlp | None = None) -> tuple[NamedArray, NamedArray | None]:
        """The materialised (W(t), b(t)) in the parameters' dtype; b is None without a bias."""
        h = hidden_at(self, t, shared_mlp)
        dtype = self.proj.weight.dtype
        weight = self.proj(h).rearrange((..., *hax.axis_spec_to_tuple(self.proj.Out))).astype(dtype)
        bias = None if self.bias_proj is None else hax.dot(h, self.bias_proj, axis=self.proj.In).astype(dtype)
        return weight, bias

    def at(self, t, shared_mlp: TimeMlp | None = None, scale=1.0) -> hnn.Linear:
        """The ordinary linear layer x ↦ scale·(x·W(t) + b(t)) at time t."""
        weight, bias = self.weights_at(t, shared_mlp)
        return hnn.Linear(weight=weight * scale, bias=None if bias is None else bias * scale, In=self.In, Out=self.Out)


def linears_at(t, shared_mlp: TimeMlp | None, scale, *linears: TimeLinear) -> list[hnn.Linear]:
    """A block's ``linears`` at time t, the last (its output projection) multiplied by ``scale``."""
    *inputs, output = linears
    return [linear.at(t, shared_mlp) for linear in inputs] + [output.at(t, shared_mlp, scale)]


class TimeLayerNorm(eqx.Module):
    """LN_t(x) = (1 + h(t)·F_w) ⊙ norm(x) + h(t)·F_b, F_w, F_b zero at init (a plain LayerNorm). ``mlp`` is None
    under App. D.2's shared MLP, passed as ``shared_mlp``."""

    norm_type: ClassVar[type[LayerNormBase]] = hnn.LayerNorm

    mlp: TimeMlp | None
    scale_proj: NamedArray
    shift_proj: NamedArray | None
    axis: AxisSpec = eqx.field(static=True)
    eps: float = eqx.field(static=True)

    @classmethod
    def init(
        cls,
        axis: AxisSpec,
        Sinusoidal: Axis,
        TimeEmbed: Axis,
        *,
        key,
        eps: float = 1e-5,
        use_bias: bool = True,
        shared_mlp: TimeMlp | None = None,
        time_precision: str = "compute",
    ):
        mlp = None
        if shared_mlp is None:
            mlp = TimeMlp.init(Sinusoidal, TimeEmbed, key=key, time_precision=time_precision)
        scale_proj = hax.zeros(hax.concat_axis_specs(TimeEmbed, axis))
        shift_proj = hax.zeros(hax.concat_axis_specs(TimeEmbed, axis)) if use_bias else None
        return cls(mlp, scale_proj, shift_proj, axis, eps)

    def weights_at(self, t, shared_mlp: TimeMlp | None = None) -> tuple[NamedArray, NamedArray | None]:
        """(1 + h(t)·F_w, h(t)·F_b) in the parameters' dtype."""
        h = hidden_at(self, t, shared_mlp)
        dtype = self.scale_proj.dtype
        TimeEmbed = self.scale_proj.axes[0]
        weight = (1.0 + hax.dot(h, self.scale_proj, axis=TimeEmbed)).astype(dtype)
        bias = None if self.shift_proj is None else hax.dot(h, self.shift_proj, axis=TimeEmbed).astype(dtype)
        return weight, bias

    def at(self, t, shared_mlp: TimeMlp | None = None) -> LayerNormBase:
        """The ordinary (time-independent) norm layer at time t."""
        weight, bias = self.weights_at(t, shared_mlp)
        return self.norm_type(self.axis, weight, bias, self.eps)


class TimeRmsNorm(TimeLayerNorm):
    """RMSNorm_t(x) = (1 + h(t)·F_w) ⊙ x / rms(x) [+ h(t)·F_b]: the Llama variant (App. C.6); the authors' code has
    the shift h(t)·F_b (docs/paper.md#llama-layer)."""

    norm_type: ClassVar[type[LayerNormBase]] = hnn.RmsNorm


@dataclasses.dataclass(frozen=True)
class TimeLayers:
    """Builds a field's maps W(t), b(t) and its time-dependent norms (``Norm``: TimeLayerNorm or TimeRmsNorm) alike
    from its DiffEqFormer ``config``: the same time axes (S, D), init std, bias, norm shift, e(t) precision, weight
    layout (``out_first``) and, in the App. D.2 design, the one time MLP they all share."""

    config: Any
    out_first: bool
    Norm: type
    shared_mlp: TimeMlp | None

    @staticmethod
    def for_config(config, *, out_first: bool, Norm: type, key) -> "TimeLayers":
        """``key`` draws the shared MLP when ``config.shared_time_mlp``."""
        shared = None
        if config.shared_time_mlp:
            shared = TimeMlp.init(config.Sinusoidal, config.TimeEmbed, key=key, time_precision=config.time_precision)
        return TimeLayers(config, out_first, Norm, shared)

    def layer(self, kind: type, *axes: AxisSpec, key, **options):
        """``kind.init(*axes, ...)`` with the config's time axes and e(t) precision and the shared MLP."""
        c = self.config
        time = dict(shared_mlp=self.shared_mlp, time_precision=c.time_precision)
        return kind.init(*axes, c.Sinusoidal, c.TimeEmbed, key=key, **time, **options)

    def linear(self, In: AxisSpec, Out: AxisSpec, key) -> TimeLinear:
        c = self.config
        options = dict(initializer_range=c.initializer_range, use_bias=c.use_bias, out_first=self.out_first)
        return self.layer(TimeLinear, In, Out, key=key, **options)

    def norm(self, key) -> TimeLayerNorm:
        """A ``Norm`` over the embedding."""
        c = self.config
        return self.layer(self.Norm, c.Embed, key=key, eps=c.layer_norm_epsilon, use_bias=c.norm_shift)
