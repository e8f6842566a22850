"""Time-dependent linear map W(t), b(t) of DiffEqFormer (paper Eq. 6, §4.2, App. A, App. D.2)."""

import equinox as eqx
import haliax as hax
import haliax.nn as hnn
import jax.numpy as jnp
import jax.random as jrandom
import numpy as np
from haliax import Axis, AxisSpec, NamedArray

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

    @property
    def TimeEmbed(self) -> Axis:
        return self.proj.In

    def hidden(self, t, shared_mlp: TimeMlp | None = None) -> NamedArray:
        """h(t), from this weight's own MLP or else from ``shared_mlp``."""
        mlp = self.mlp if self.mlp is not None else shared_mlp
        if mlp is None:
            raise ValueError("This TimeLinear has no MLP of its own; pass the model's shared_mlp.")
        return mlp(t)

    def weights_at(self, t, shared_mlp: TimeMlp | None = None) -> tuple[NamedArray, NamedArray | None]:
        """The materialised (W(t), b(t)) in the parameters' dtype; b is None without a bias."""
        h = self.hidden(t, shared_mlp)
        dtype = self.proj.weight.dtype
        weight = self.proj(h).rearrange((..., *hax.axis_spec_to_tuple(self.proj.Out))).astype(dtype)
        bias = None
        if self.bias_proj is not None:
            bias = hax.dot(h, self.bias_proj, axis=self.TimeEmbed).astype(dtype)
        return weight, bias

    def at(self, t, shared_mlp: TimeMlp | None = None, scale=1.0) -> hnn.Linear:
        """The ordinary linear layer x ↦ scale·(x·W(t) + b(t)) at time t."""
        weight, bias = self.weights_at(t, shared_mlp)
        return hnn.Linear(weight=weight * scale, bias=None if bias is None else bias * scale, In=self.In, Out=self.Out)


def linears_at(t, shared_mlp: TimeMlp | None, scale, *linears: TimeLinear) -> list[hnn.Linear]:
    """A block's ``linears`` at time t, the last (its output projection) multiplied by ``scale``."""
    *inputs, output = linears
    return [linear.at(t, shared_mlp) for linear in inputs] + [output.at(t, shared_mlp, scale)]
