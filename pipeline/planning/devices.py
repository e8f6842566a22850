"""What planning knows of each GPU it may plan for, from NVIDIA's datasheets (SXM): one row per device, and the
precision a run computes in."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Device:
    """One GPU: its memory, and its dense peak TFLOP/s by compute precision (``bf16``: bf16/fp16 tensor cores;
    ``f32``: TF32 for float32 compute)."""

    memory_bytes: int
    peak_tflops: dict[str, float]


DEVICES = {
    "a100": Device(memory_bytes=80 * 10**9, peak_tflops={"bf16": 312.0, "f32": 156.0}),
    "h100": Device(memory_bytes=80 * 10**9, peak_tflops={"bf16": 989.0, "f32": 494.7}),
    "h200": Device(memory_bytes=141 * 10**9, peak_tflops={"bf16": 989.0, "f32": 494.7}),
}
DEFAULT_MFU = 0.4
"""Model FLOPs utilisation an estimate assumes where nothing was measured."""


def compute_precision(mixed_precision: str) -> str:
    """'bf16' or 'f32': the compute dtype of a jmp policy string such as ``p=f32,c=bfloat16``."""
    import jax.numpy as jnp
    import jmp

    compute = jmp.get_policy(mixed_precision).compute_dtype
    return "bf16" if compute in (jnp.bfloat16, jnp.float16) else "f32"
