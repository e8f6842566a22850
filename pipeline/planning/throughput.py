"""Training throughput per GPU: where the measured table ``results/benchmarks/throughput-sizes-<device>.csv``
(``python -m pipeline bench throughput-sizes``) lies and its columns (``pipeline.planning.measured`` reads it); an
estimate where a model was not measured starts from the device's dense peak (``pipeline.planning.devices``)."""

from __future__ import annotations

from pathlib import Path

from pipeline.config import REPO_ROOT

BENCHMARKS_DIR = REPO_ROOT / "results" / "benchmarks"
THROUGHPUT_COLUMNS = (
    "device",
    "family",
    "size",
    "hidden_dim",
    "num_layers",
    "seq_len",
    "params",
    "tokens_per_s_per_gpu",
    "measured_on",
    "notes",
)
"""Columns of a measured throughput table (one row per device, family and size; tokens/s of training)."""
DEFAULT_MFU = 0.4


def default_throughput_path(device: str) -> Path:
    return BENCHMARKS_DIR / f"throughput-sizes-{device}.csv"


def compute_precision(mixed_precision: str) -> str:
    """'bf16' or 'f32': the compute dtype of a jmp policy string such as ``p=f32,c=bfloat16``."""
    import jax.numpy as jnp
    import jmp

    compute = jmp.get_policy(mixed_precision).compute_dtype
    return "bf16" if compute in (jnp.bfloat16, jnp.float16) else "f32"
