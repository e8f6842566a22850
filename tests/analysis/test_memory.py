"""Memory probe arithmetic: XLA's plan counts donated buffers once; CPU devices report no allocator peak."""

import jax
import jax.numpy as jnp

from pipeline.analysis.memory import device_peak_bytes
from pipeline.train.step_plan import compiled_peak_bytes

MIB = 2**20


def _plan(donate: bool):
    step = jax.jit(lambda x, y: (x * 2.0 + y, y.sum()), donate_argnums=(0,) if donate else ())
    x = jnp.ones((MIB // 4,), jnp.float32)
    return step.lower(x, x).compile().memory_analysis()


def test_compiled_plan_is_arguments_plus_outputs_plus_temporaries_less_donated_buffers():
    kept, donated = _plan(False), _plan(True)
    assert kept.argument_size_in_bytes == 2 * MIB and kept.alias_size_in_bytes == 0
    assert compiled_peak_bytes(kept) >= 3 * MIB
    assert donated.alias_size_in_bytes == MIB
    assert compiled_peak_bytes(donated) == compiled_peak_bytes(kept) - MIB


def test_cpu_devices_report_no_allocator_peak():
    assert device_peak_bytes(jax.devices("cpu")) is None
