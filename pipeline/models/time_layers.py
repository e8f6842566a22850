"""Builder of the time-dependent layers of one DiffEqFormer vector field (paper Eq. 6, App. D.2)."""

import dataclasses

from haliax import Axis, AxisSpec

from .time_embedding import TimeMlp
from .time_linear import TimeLinear


@dataclasses.dataclass(frozen=True)
class TimeLayers:
    """Builds a field's maps W(t), b(t) and its time-dependent norms alike: the same time axes (S, D), init std,
    bias, norm shift, e(t) precision, weight layout (``out_first``) and, in the App. D.2 design, the one time MLP
    they all share."""

    Sinusoidal: Axis
    TimeEmbed: Axis
    initializer_range: float
    use_bias: bool
    eps: float
    norm_shift: bool
    time_precision: str
    out_first: bool
    shared_mlp: TimeMlp | None

    @staticmethod
    def for_config(config, *, out_first: bool, key) -> "TimeLayers":
        """From a DiffEqFormer config; ``key`` draws the shared MLP when ``config.shared_time_mlp``."""
        shared = None
        if config.shared_time_mlp:
            shared = TimeMlp.init(config.Sinusoidal, config.TimeEmbed, key=key, time_precision=config.time_precision)
        return TimeLayers(
            config.Sinusoidal,
            config.TimeEmbed,
            config.initializer_range,
            config.use_bias,
            config.layer_norm_epsilon,
            config.norm_shift,
            config.time_precision,
            out_first,
            shared,
        )

    def linear(self, In: AxisSpec, Out: AxisSpec, key) -> TimeLinear:
        return TimeLinear.init(
            In,
            Out,
            self.Sinusoidal,
            self.TimeEmbed,
            key=key,
            initializer_range=self.initializer_range,
            use_bias=self.use_bias,
            out_first=self.out_first,
            shared_mlp=self.shared_mlp,
            time_precision=self.time_precision,
        )

    def norm(self, kind: type, axis: AxisSpec, key):
        """``kind`` is TimeLayerNorm or TimeRmsNorm."""
        return kind.init(
            axis,
            self.Sinusoidal,
            self.TimeEmbed,
            key=key,
            eps=self.eps,
            use_bias=self.norm_shift,
            shared_mlp=self.shared_mlp,
            time_precision=self.time_precision,
        )
