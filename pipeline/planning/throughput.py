"""Training throughput per GPU: the measured table ``results/benchmarks/throughput-sizes-<device>.csv`` (``python
-m pipeline bench throughput-sizes``); an estimate where a model was not measured starts from the device's dense peak
(``pipeline.planning.devices``)."""

from __future__ import annotations

import csv
import io
import math
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


def _fail(path: Path, message: str) -> ValueError:
    return ValueError(f"{path}: {message}")


def read_throughput(path: Path, device: str) -> dict[tuple[str, str, int], float]:
    """Measured training tokens/s per GPU of ``device``, keyed by (family, size, num_layers)."""
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no throughput table; measure one with `python -m pipeline bench throughput-sizes`."
        )
    reader = csv.DictReader(io.StringIO(path.read_text()))
    missing = [column for column in THROUGHPUT_COLUMNS if column not in (reader.fieldnames or [])]
    if missing:
        raise _fail(path, f"missing column {missing[0]!r}; expected the columns {list(THROUGHPUT_COLUMNS)}.")
    table: dict[tuple[str, str, int], float] = {}
    for line, row in enumerate(reader, start=2):
        if row["device"] != device:
            continue
        for column in ("num_layers", "tokens_per_s_per_gpu"):
            try:
                value = float(row[column])
            except (TypeError, ValueError):
                value = math.nan
            if not value > 0 or (column == "num_layers" and not value.is_integer()):
                raise _fail(
                    path, f"column {column!r} must hold a positive number on line {line} (got {row[column]!r})."
                )
        key = (row["family"], row["size"], int(row["num_layers"]))
        if key in table:
            raise _fail(
                path,
                f"line {line} repeats family {key[0]!r}, size {key[1]!r}, num_layers {key[2]} "
                f"for device {device!r}; expected one row each.",
            )
        table[key] = float(row["tokens_per_s_per_gpu"])
    if not table:
        raise _fail(path, f"column 'device' has no row for device {device!r}.")
    return table


def compute_precision(mixed_precision: str) -> str:
    """'bf16' or 'f32': the compute dtype of a jmp policy string such as ``p=f32,c=bfloat16``."""
    import jax.numpy as jnp
    import jmp

    compute = jmp.get_policy(mixed_precision).compute_dtype
    return "bf16" if compute in (jnp.bfloat16, jnp.float16) else "f32"
