"""What planning knows of each GPU it may plan for, from NVIDIA's datasheets (SXM): one row per device."""

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
