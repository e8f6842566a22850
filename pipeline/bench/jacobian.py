"""Benchmark of the Lyapunov Jacobian ∂f_j/∂x_i (paper App. B): single-query field vs full sequence, side by side in
one process on one block, float32 (docs/testing.md#benchmarks). Goal: ≥ 10× faster at N = 256 tokens, hidden 256."""

import datetime
import platform
import statistics

GOAL_SPEEDUP = 10.0


def run_benchmark(tokens: int, hidden_dim: int, num_heads: int, repeats: int) -> dict:
    """Time both Jacobians of the last token of a random sequence through one random block, interleaved after one
    warm-up; check they agree."""
    import equinox as eqx
    import haliax as hax
    import jax
    import numpy as np
    from levanter.models.gpt2 import Gpt2Config

    from pipeline.analysis.lyapunov import full_sequence_jacobian, query_jacobian
    from pipeline.bench.timing import time_interleaved
    from pipeline.models.diffeq_gpt import ParallelGptBlock

    config = Gpt2Config(seq_len=tokens, hidden_dim=hidden_dim, num_heads=num_heads, num_layers=1)
    k_block, k_x = jax.random.split(jax.random.PRNGKey(0))
    block = ParallelGptBlock.init(config, key=k_block)
    x = hax.random.normal(k_x, (config.Pos, config.Embed))
    single = eqx.filter_jit(query_jacobian)
    full = eqx.filter_jit(full_sequence_jacobian)
    samples, outputs = time_interleaved(
        {"single_query": lambda: single(block, x), "full_sequence": lambda: full(block, x, tokens - 1)},
        repeats,
        warmup=1,
    )
    a, b = np.asarray(outputs["single_query"]), np.asarray(outputs["full_sequence"])
    single_median, full_median = statistics.median(samples["single_query"]), statistics.median(samples["full_sequence"])
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "device": str(jax.devices()[0]),
        "host": {"machine": platform.machine(), "processor": platform.processor() or platform.machine()},
        "jax": jax.__version__,
        "sizes": {"tokens": tokens, "hidden_dim": hidden_dim, "num_heads": num_heads, "dtype": "float32"},
        "repeats": repeats,
        "single_query_s": samples["single_query"],
        "full_sequence_s": samples["full_sequence"],
        "single_query_median_s": single_median,
        "full_sequence_median_s": full_median,
        "speedup": full_median / single_median,
        "goal_speedup": GOAL_SPEEDUP,
        "max_relative_difference": float(np.abs(a - b).max() / np.abs(b).max()),
    }


def summary_markdown(result: dict) -> str:
    from pipeline.artifacts import markdown_table

    sizes = result["sizes"]
    timings = markdown_table(
        ["method", "median s"],
        [
            ["full sequence (reference)", f"{result['full_sequence_median_s']:.4f}"],
            ["single query", f"{result['single_query_median_s']:.4f}"],
        ],
    )
    return (
        f"# Lyapunov Jacobian benchmark ({result['date']}, {result['device']})\n\n"
        f"N = {sizes['tokens']} tokens, hidden {sizes['hidden_dim']}, {sizes['num_heads']} heads, "
        f"{sizes['dtype']}; median of {result['repeats']} interleaved runs after a warm-up.\n\n"
        f"{timings}\n\n"
        f"Speed-up: **{result['speedup']:.1f}×** (goal ≥ {result['goal_speedup']:.0f}×); "
        f"max relative difference {result['max_relative_difference']:.2e}.\n"
    )
