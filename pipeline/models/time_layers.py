"""Builder of the time-dependent layers of one DiffEqFormer vector field (paper Eq. 6, App. D.2)."""

import dataclasses
from typing import Any

from haliax import AxisSpec

from .time_embedding import TimeMlp
from .time_linear import TimeLinear


@dataclasses.dataclass(frozen=True)
class TimeLayers:
    """Builds a field's maps W(t), b(t) and its time-dependent norms alike from its DiffEqFormer ``config``: the same
    time axes (S, D), init std, bias, norm shift, e(t) precision, weight layout (``out_first``) and, in the App. D.2
    design, the one time MLP they all share."""

    config: Any
    out_first: bool
    shared_mlp: TimeMlp | None

    @staticmethod
    def for_config(config, *, out_first: bool, key) -> "TimeLayers":
        """``key`` draws the shared MLP when ``config.shared_time_mlp``."""
        shared = None
        if config.shared_time_mlp:
            shared = TimeMlp.init(config.Sinusoidal, config.TimeEmbed, key=key, time_precision=config.time_precision)
        return TimeLayers(config, out_first, shared)

    def layer(self, kind: type, *axes: AxisSpec, key, **options):
        """``kind.init(*axes, ...)`` with the config's time axes and e(t) precision and the shared MLP."""
        c = self.config
        time = dict(shared_mlp=self.shared_mlp, time_precision=c.time_precision)
        return kind.init(*axes, c.Sinusoidal, c.TimeEmbed, key=key, **time, **options)

    def linear(self, In: AxisSpec, Out: AxisSpec, key) -> TimeLinear:
        c = self.config
        options = dict(initializer_range=c.initializer_range, use_bias=c.use_bias, out_first=self.out_first)
        return self.layer(TimeLinear, In, Out, key=key, **options)

    def norm(self, kind: type, axis: AxisSpec, key):
        """``kind`` is TimeLayerNorm or TimeRmsNorm."""
        return self.layer(kind, axis, key=key, eps=self.config.layer_norm_epsilon, use_bias=self.config.norm_shift)
