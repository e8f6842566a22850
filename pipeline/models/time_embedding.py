"""Fourier time embedding e(t) and the 2-layer time MLP h(t) of DiffEqFormer (paper Eq. 6, App. A), and the
Euler solve shared by its vector fields (§4.1)."""

import math
from typing import Any

import equinox as eqx
import haliax as hax
import haliax.nn as hnn
import jax
import jax.numpy as jnp
import jax.random as jrandom
from haliax import Axis, NamedArray

TIME_SCALE = 1000.0
"""t is multiplied by this before the sinusoids: the integration interval (0, 1] is short."""
MAX_PERIOD = 10000.0


def features_axis(Sinusoidal: Axis) -> Axis:
    """The axis of e(t): size 2S+1 for S = Sinusoidal.size."""
    return Axis("time_features", 2 * Sinusoidal.size + 1)


def as_time(t) -> NamedArray:
    """A time (float, 0-d array or NamedArray of times) as a NamedArray; float32 unless already float."""
    if isinstance(t, NamedArray):
        return t
    t = jnp.asarray(t)
    if not jnp.issubdtype(t.dtype, jnp.floating):
        t = t.astype(jnp.float32)
    return hax.named(t, ())


def time_features(t, Sinusoidal: Axis) -> NamedArray:
    """e(t) = [t, sin(1000·t·f_j), cos(1000·t·f_j)], f_j = exp(-ln(10000)·j/S), j = 0..S-1 (App. A); parameter-free,
    ``t``'s axes plus ``time_features``."""
    t = as_time(t)
    j = jnp.arange(Sinusoidal.size, dtype=t.dtype)
    freqs = jnp.exp(-math.log(MAX_PERIOD) * j / Sinusoidal.size)
    args = TIME_SCALE * t.array[..., None] * freqs
    raw = jnp.concatenate([t.array[..., None], jnp.sin(args), jnp.cos(args)], axis=-1)
    return hax.named(raw, t.axes + (features_axis(Sinusoidal),))


TIME_GRIDS = ("reference", "exact")
"""How the Euler times are computed (preset key ``fidelity.time_grid``): ``reference``, t_k = fl(fl(k)·fl(1/N)) in
the dtype of the weights the times are used with (the authors' ``(arange(N) + 1) * dt``: the compute dtype in
training and evaluation, bf16 in mixed precision, where it differs from bf16(k/N) by one ulp at some k; the
parameters' dtype in resampling), or ``exact``, t_k = k/N in float32."""


def grid_times(k, num_steps, grid: str, dtype):
    """The times t = k·dt, dt = 1/N, N = ``num_steps``, of the step numbers ``k`` (an array or NamedArray, possibly
    fractional, as a solver's stage times) on the Euler grid ``grid`` (one of ``TIME_GRIDS``); ``dtype`` is the
    weights' (used by ``reference``). The Euler grid of §4.1 is t_k, k = 1..N."""
    if grid == "exact":
        return k.astype(jnp.float32) / num_steps
    if grid != "reference":
        raise ValueError(f"fidelity.time_grid must be one of {TIME_GRIDS}, got {grid!r}.")
    dt = 1.0 / num_steps
    return k.astype(dtype) * (dt if isinstance(dt, float) else dt.astype(dtype))


TIME_PRECISIONS = ("compute", "float32")
"""Dtype of e(t) (preset key ``fidelity.time_precision``): ``compute``, that of the MLP's weights (bf16 in mixed-
precision training, f32 where the model is used in its parameter dtype, as in resampling; the authors' code,
docs/paper.md#time-grid), or always ``float32``."""


class TimeMlp(eqx.Module):
    """h(t) = Linear(D→D)(SiLU(Linear(2S+1→D)(e(t)))), the MLP of the time-dependent unit (Eq. 6, App. A)."""

    lin1: hnn.Linear
    lin2: hnn.Linear
    Sinusoidal: Axis = eqx.field(static=True)
    time_precision: str = eqx.field(static=True, default="compute")

    TimeEmbed = property(lambda self: self.lin2.Out)

    @staticmethod
    def init(Sinusoidal: Axis, TimeEmbed: Axis, *, key, time_precision: str = "compute") -> "TimeMlp":
        if time_precision not in TIME_PRECISIONS:
            raise ValueError(f"fidelity.time_precision must be one of {TIME_PRECISIONS}, got {time_precision!r}.")
        k1, k2 = jrandom.split(key)
        Hidden = TimeEmbed.alias("time_hidden")
        lin1 = hnn.Linear.init(In=features_axis(Sinusoidal), Out=Hidden, key=k1)
        lin2 = hnn.Linear.init(In=Hidden, Out=TimeEmbed, key=k2)
        return TimeMlp(lin1, lin2, Sinusoidal, time_precision)

    def __call__(self, t) -> NamedArray:
        t = as_time(t)
        if self.time_precision == "compute":
            t = t.astype(self.lin1.weight.dtype)
        e = time_features(t, self.Sinusoidal)
        return self.lin2(hnn.silu(self.lin1(e)))


STEP_SCALINGS = ("output", "folded")
"""Where an Euler block puts its step dt (preset key ``fidelity.resampling``): ``output``, x + dt·block(x) with the
weights W(t_k) unscaled (the authors' code, docs/paper.md#resampled-model), or ``folded`` into the output projections
(dt·W, dt·b), equal in exact arithmetic but a LoRA/full update to those projections then acts 1/dt times stronger."""


class EulerField(eqx.Module):
    """A vector field f(t, x) whose ``at(t, scale, step)`` is the discrete block x ↦ x + step·scale·f(t, x) (scale
    folded into the output projections, step applied to the block's output), and its Euler solve
    x_k = x_{k-1} + dt·f(t_k, x_{k-1}), dt = 1/N, as N stacked blocks (§4.1). A subclass names its time-dependent
    ``layers`` (norm, attention, norm, feed-forward), its ``Block`` and the block's ``block_option``."""

    config: eqx.AbstractVar[Any]
    shared_mlp: eqx.AbstractVar[TimeMlp | None]

    def at(self, t, scale=1.0, step=1.0) -> eqx.Module:
        """The ``Block`` x ↦ x + step·scale·f(t, x) with every weight materialised at time t and the output
        projections multiplied by ``scale``."""
        norm_1, attn, norm_2, mlp = self.layers
        shared = self.shared_mlp
        layers = norm_1.at(t, shared), attn.at(t, shared, scale), norm_2.at(t, shared), mlp.at(t, shared, scale)
        return self.Block(*layers, self.block_option, step)

    def times(self, k, num_steps):
        """The times t = k·dt, dt = 1/N, of step numbers ``k`` on the model's ``time_grid`` (``grid_times``), for the
        dtype of the field's weights (the compute dtype under Levanter's mixed precision, else the parameters'): the
        Euler grid t_k, k = 1..N, or a solver's stage times."""
        dtype = jax.tree_util.tree_leaves(eqx.filter(self, eqx.is_inexact_array))[0].dtype
        return grid_times(k, num_steps, self.config.time_grid, dtype)

    def euler_blocks(self, num_steps: int, step_scaling: str = "output") -> hnn.Stacked:
        """The N Euler steps as stacked blocks: weights W(t_k), t_k = k/N on the config's ``time_grid``, generated
        once (vmapped over k), with dt = 1/N applied per ``step_scaling`` (one of ``STEP_SCALINGS``)."""
        if step_scaling not in STEP_SCALINGS:
            raise ValueError(f"fidelity.resampling must be one of {STEP_SCALINGS}, got {step_scaling!r}.")
        Steps = self.config.Layers.resize(num_steps)
        dt = 1.0 / num_steps
        times = self.times(hax.arange(Steps) + 1, num_steps)
        dt_at = {"step": dt} if step_scaling == "output" else {"scale": dt}
        blocks = hax.vmap(lambda t: self.at(t, **dt_at), Steps)(times)
        policy = hax.ScanCheckpointPolicy.from_bool_or_str(self.config.gradient_checkpointing)
        return hnn.Stacked(blocks, Steps, policy)
