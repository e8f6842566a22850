"""Benchmark of the Lyapunov analysis' Jacobian ∂f_j/∂x_i (paper App. B): single-query vector field vs the
full sequence, measured side by side in one process on one block of the vector field (dt folded in as in the
Euler steps), float32.

``python -m pipeline.analysis.jacobian_benchmark`` writes ``results/benchmarks/lyapunov-jacobian-cpu.json`` and a
Markdown summary beside it (``--out`` to change). Goal: the single-query Jacobian ≥ 10× faster at N = 256 tokens,
hidden 256.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import time
from pathlib import Path

import equinox as eqx
import haliax as hax
import jax
import jax.numpy as jnp
import numpy as np
from levanter.models.gpt2 import Gpt2Config

from pipeline.analysis.lyapunov import full_sequence_jacobian, query_jacobian
from pipeline.artifacts import atomic_write_json, atomic_write_text
from pipeline.models.diffeq_gpt import ParallelGptBlock

GOAL_SPEEDUP = 10.0


def timed(fn, repeats: int) -> list[float]:
    """Wall-clock seconds of ``repeats`` calls of ``fn`` (blocked until its result is ready), after one warm-up."""
    jax.block_until_ready(fn())
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        samples.append(time.perf_counter() - start)
    return samples


def run_benchmark(tokens: int, hidden_dim: int, num_heads: int, repeats: int, seed: int = 0) -> dict:
    """Time both Jacobians of the last token of a random sequence through one random block; check they agree."""
    config = Gpt2Config(seq_len=tokens, hidden_dim=hidden_dim, num_heads=num_heads, num_layers=1)
    k_block, k_x = jax.random.split(jax.random.PRNGKey(seed))
    block = ParallelGptBlock.init(config, key=k_block)
    x = hax.random.normal(k_x, (config.Pos, config.Embed))
    single = eqx.filter_jit(query_jacobian)
    full = eqx.filter_jit(full_sequence_jacobian)
    single_s = timed(lambda: single(block, x), repeats)
    full_s = timed(lambda: full(block, x, tokens - 1), repeats)
    a, b = np.asarray(single(block, x)), np.asarray(full(block, x, tokens - 1))
    single_median, full_median = statistics.median(single_s), statistics.median(full_s)
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "device": str(jax.devices()[0]),
        "host": {"machine": platform.machine(), "processor": platform.processor() or platform.machine()},
        "jax": jax.__version__,
        "sizes": {"tokens": tokens, "hidden_dim": hidden_dim, "num_heads": num_heads, "dtype": "float32"},
        "repeats": repeats,
        "single_query_s": single_s,
        "full_sequence_s": full_s,
        "single_query_median_s": single_median,
        "full_sequence_median_s": full_median,
        "speedup": full_median / single_median,
        "goal_speedup": GOAL_SPEEDUP,
        "max_relative_difference": float(np.abs(a - b).max() / np.abs(b).max()),
    }


def summary_markdown(result: dict) -> str:
    sizes = result["sizes"]
    return (f"# Lyapunov Jacobian benchmark ({result['date']}, {result['device']})\n\n"
            f"N = {sizes['tokens']} tokens, hidden {sizes['hidden_dim']}, {sizes['num_heads']} heads, "
            f"{sizes['dtype']}; median of {result['repeats']} runs after a warm-up.\n\n"
            f"| method | median s |\n|---|---|\n"
            f"| full sequence (reference) | {result['full_sequence_median_s']:.4f} |\n"
            f"| single query | {result['single_query_median_s']:.4f} |\n\n"
            f"Speed-up: **{result['speedup']:.1f}×** (goal ≥ {result['goal_speedup']:.0f}×); "
            f"max relative difference {result['max_relative_difference']:.2e}.\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks/lyapunov-jacobian-cpu.json"))
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--hidden-dim", type=int, default=256)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    jnp.zeros(()).block_until_ready()
    result = run_benchmark(args.tokens, args.hidden_dim, args.num_heads, args.repeats)
    atomic_write_json(args.out, result)
    atomic_write_text(args.out.with_suffix(".md"), summary_markdown(result))
    print(summary_markdown(result))


if __name__ == "__main__":
    main()
