"""Time-dependent LayerNorm / RMSNorm of DiffEqFormer (paper App. A: norms have time-dependent weights)."""

from typing import ClassVar

import equinox as eqx
import haliax as hax
import haliax.nn as hnn
from haliax import Axis, AxisSpec, NamedArray
from haliax.nn.normalization import LayerNormBase

from .time_embedding import TimeMlp


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
        mlp = self.mlp if self.mlp is not None else shared_mlp
        if mlp is None:
            raise ValueError("This norm has no MLP of its own; pass the model's shared_mlp.")
        h = mlp(t)
        dtype = self.scale_proj.dtype
        TimeEmbed = mlp.TimeEmbed
        weight = (1.0 + hax.dot(h, self.scale_proj, axis=TimeEmbed)).astype(dtype)
        bias = None
        if self.shift_proj is not None:
            bias = hax.dot(h, self.shift_proj, axis=TimeEmbed).astype(dtype)
        return weight, bias

    def at(self, t, shared_mlp: TimeMlp | None = None) -> LayerNormBase:
        """The ordinary (time-independent) norm layer at time t."""
        weight, bias = self.weights_at(t, shared_mlp)
        return self.norm_type(self.axis, weight, bias, self.eps)


class TimeRmsNorm(TimeLayerNorm):
    """RMSNorm_t(x) = (1 + h(t)·F_w) ⊙ x / rms(x) [+ h(t)·F_b]: the Llama variant (App. C.6); the authors' code has
    the shift h(t)·F_b (docs/paper.md#llama-layer)."""

    norm_type: ClassVar[type[LayerNormBase]] = hnn.RmsNorm
