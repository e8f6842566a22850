"""Cost preview: the GPU-hours of every stage of a preset, before anything runs (docs/planning.md#cost-preview).

Per run, the tokens it processes (``Workload.tokens``) times the seconds a GPU needs per token: from the measured
table (``pipeline.planning.measured``) or, for a model it lacks, estimated as Levanter's forward FLOPs per token
(``LmConfig.flops_per_token``) × 3 (forward + backward, as Levanter's MFU) / (MFU × the device's dense peak); a
forward-only token costs a third. GPU-hours assume linear data-parallel scaling: wall-clock = GPU-hours / GPUs.
Unless measured, LoRA is costed as a full fine-tune (an upper bound: frozen weights skip their weight gradients,
about a third of the FLOPs) and lm-eval requests as full context windows; the analyses and periodic validation (at
most a few % of a run's tokens) are not counted. Each training run also shows its passes over its training
data and its checkpoint disk (``checkpoint_disk``).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from pipeline.config import TrainSpec
from pipeline.config.site import preset_results
from pipeline.planning.grid import TRAIN_PASSES, Grid, Workload
from pipeline.planning.measured import MeasuredTable, preflight_path
from pipeline.planning.model_cost import model_cost
from pipeline.train.checkpoints import KEPT_WHILE_TRAINING

PUBLISHED_TRAIN_TOKENS = {("dlwh/wikitext_103_detokenized", "gpt2"): 0.12e9, ("Skylion007/openwebtext", "gpt2"): 9.04e9}
"""Training tokens of the paper's corpora under a tokenizer, as published: WikiText-103 ≈ 0.12 B GPT-2 tokens
(docs/paper.md#exact-steps), OpenWebText ≈ 9.04 B (nanoGPT's preparation of the same dataset); the fallback of
``data_passes`` before the caches are built. No published count for the Llama tokenizer: "?" until built."""
STAGES = ("pretrain", "finetune", "evaluate", "analysis")
CHECKPOINT_BYTES_PER_PARAMETER = 12
"""f32 parameters plus Adam's first and second moments, 4 bytes each (for LoRA an upper bound: Levanter saves the
trainable parameters only)."""


@dataclasses.dataclass(frozen=True)
class Device:
    """One GPU, from NVIDIA's datasheets (SXM): its memory, and its dense peak TFLOP/s by compute precision
    (``bf16``: bf16/fp16 tensor cores; ``f32``: TF32 for float32 compute)."""

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


def checkpoint_disk(parameters: int, train: TrainSpec | None) -> dict[str, int]:
    """Checkpoint disk of a run of ``parameters`` trained as ``train`` (docs/runs.md#what-is-kept; both 0 for a
    workload that trains nothing, ``train`` None), at ``CHECKPOINT_BYTES_PER_PARAMETER`` per checkpoint:
    ``checkpoint_bytes``, what the finished run keeps (the final checkpoint plus the periodic ones, steps
    0 < s < steps-1 multiples of ``checkpoint_every``, whose step is a multiple of ``keep_checkpoints_every``), and
    ``running_checkpoint_bytes``, the most it holds while it trains (those, the ``KEPT_WHILE_TRAINING`` newest
    complete ones of ``pipeline.train.checkpoints`` and the one being written in the final one's place)."""
    if train is None:
        return {"checkpoint_bytes": 0, "running_checkpoint_bytes": 0}
    kept = 1
    if train.keep_checkpoints_every:
        kept += (train.steps - 2) // math.lcm(train.checkpoint_every, train.keep_checkpoints_every)
    each = parameters * CHECKPOINT_BYTES_PER_PARAMETER
    return {"checkpoint_bytes": each * kept, "running_checkpoint_bytes": each * (kept + KEPT_WHILE_TRAINING)}


def estimated_tokens_per_s(workload: Workload, device: str, mfu: float, config: dict[str, Any]) -> float:
    """Training tokens/s per GPU = MFU × peak FLOP/s / (3 × forward FLOPs per token)."""
    if device not in DEVICES:
        family, size, layers = workload.throughput_key
        raise ValueError(
            f"--device {device!r} has no measured throughput for {workload.model_id} (family {family!r}, "
            f"size {size!r}, num_layers {layers}) and no peak FLOP/s to estimate from; expected a "
            f"device in {sorted(DEVICES)} or a measured row."
        )
    _, forward_flops = model_cost(workload, config)
    peak = DEVICES[device].peak_tflops[compute_precision(workload.train.mixed_precision)] * 1e12
    return mfu * peak / (TRAIN_PASSES * forward_flops)


def corpus_train_tokens(config: dict[str, Any], results: Path, dataset: str, tokenizer: str) -> float | None:
    """Training tokens of ``dataset`` under ``tokenizer``: the count of the cache built in the preset's ``results``
    folder, else the published size."""
    stats = results / "data" / "caches" / f"{dataset}-{tokenizer}" / "stats.json"
    if stats.is_file():
        return float(json.loads(stats.read_text())["train"]["tokens"])
    source = config["datasets"][dataset]["source"]
    return PUBLISHED_TRAIN_TOKENS.get((source.get("id"), config["tokenizers"][tokenizer].get("name")))


def cost_rows(
    workloads: list[Workload],
    device: str,
    mfu: float,
    config: dict[str, Any],
    measured: MeasuredTable | None = None,
    results: Path | None = None,
) -> list[dict[str, Any]]:
    """One row per run on ``device``: tokens, training tokens/s per GPU (``measured``'s, else estimated), GPU-hours =
    tokens × passes / 3 / tokens_per_s / 3600, passes over the training data (of the caches built in ``results``,
    the preset's results folder: default the repository's), checkpoint bytes kept, and held while it trains."""
    results = results or preset_results(None, config["preset"])
    rows = []
    for workload in workloads:
        training = workload.trains
        corpus = corpus_train_tokens(config, results, workload.dataset, workload.tokenizer) if training else None
        parameters, forward_flops = model_cost(workload, config)
        tokens = workload.tokens(config)
        tokens_per_s, source = (measured and measured.tokens_per_s(workload)) or (
            estimated_tokens_per_s(workload, device, mfu, config),
            "estimate",
        )
        gpu_hours = tokens * workload.passes / TRAIN_PASSES / tokens_per_s / 3600
        rows.append(
            {
                "stage": workload.stage,
                "run_id": workload.model_id,
                "family": workload.family,
                "size": workload.run.size,
                "hidden_dim": workload.run.model.hidden_dim,
                "num_layers": workload.num_layers,
                "seq_len": workload.run.model.seq_len,
                "parameters": parameters,
                "forward_flops_per_token": forward_flops,
                "tokens": tokens,
                "passes": workload.passes,
                "tokens_per_s_per_gpu": tokens_per_s,
                "gpu_hours": gpu_hours,
                "source": source,
                "data_passes": tokens / corpus if corpus else None,
                **checkpoint_disk(parameters, workload.train if training else None),
            }
        )
    return rows


def stage_rows(run_rows: list[dict[str, Any]], analysis_runs: int) -> list[dict[str, Any]]:
    """Per stage: runs, tokens, GPU-hours, checkpoint disk kept, where the throughput came from and the most passes
    over a run's training data; then the analyses (negligible) and a total."""
    rows = []
    for stage in STAGES[:-1]:
        runs = [row for row in run_rows if row["stage"] == stage]
        passes = [row["data_passes"] for row in runs if row["data_passes"] is not None]
        rows.append(
            {
                "stage": stage,
                "runs": len(runs),
                **{key: sum(row[key] for row in runs) for key in ("tokens", "gpu_hours", "checkpoint_bytes")},
                "source": "+".join(sorted({row["source"] for row in runs})) or "-",
                "max_data_passes": max(passes, default=None),
            }
        )
    analysis = {"stage": "analysis", "runs": analysis_runs, "checkpoint_bytes": 0, "source": "negligible"}
    rows.append({**analysis, **dict.fromkeys(("tokens", "gpu_hours", "max_data_passes"))})
    total = {key: sum(row[key] or 0 for row in rows) for key in ("runs", "tokens", "gpu_hours", "checkpoint_bytes")}
    sources = "+".join(sorted({row["source"] for row in run_rows}))
    return [*rows, {"stage": "total", **total, "source": sources, "max_data_passes": None}]


def preview(
    grid: Grid, device: str, throughput: Path | None = None, mfu: float = DEFAULT_MFU, preflight: Path | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(stage rows, run rows) of the preset's ``grid`` on ``device``: tokens/s from the preflight report
    (``preflight``, default the preset's), else the measured table (``throughput``, default the device's), else
    estimated."""
    if not 0 < mfu <= 1:
        raise ValueError(f"--mfu must be in (0, 1] (got {mfu}).")
    config = grid.config
    measured = MeasuredTable(
        grid, device, preflight=preflight or preflight_path(config["preset"]), throughput=throughput
    )
    run_rows = cost_rows(grid.costed, device, mfu, config, measured)
    # the analysis stage's jobs: one per run of each per-run analysis, one per whole-preset analysis
    analyses = sum(len(section["runs"]) if "runs" in section else 1 for section in config["analysis"].values())
    return stage_rows(run_rows, analyses), run_rows


def format_stage_table(rows: list[dict[str, Any]]) -> str:
    """A fixed-width text table: stage, runs, tokens (billions), GPU-hours, most passes over a run's training
    data, kept checkpoint disk (GB), source."""
    header = f"{'stage':<10} {'runs':>5} {'tokens':>12} {'GPU-hours':>11} {'max passes':>10} {'ckpt GB':>9}  source"
    lines = [header, "-" * len(header)]
    for row in rows:
        tokens = "negligible" if row["tokens"] is None else f"{row['tokens'] / 1e9:,.3f} B"
        hours = "~0" if row["gpu_hours"] is None else f"{row['gpu_hours']:,.1f}"
        passes = "-" if row["max_data_passes"] is None else f"{row['max_data_passes']:,.1f}"
        lines.append(
            f"{row['stage']:<10} {row['runs']:>5} {tokens:>12} {hours:>11} {passes:>10} "
            f"{row['checkpoint_bytes'] / 1e9:>9,.1f}  {row['source']}"
        )
    return "\n".join(lines)


def format_passes_table(rows: list[dict[str, Any]]) -> str:
    """Passes over the training data per training run ("?": corpus size unknown until its cache is built)."""
    lines = [f"{'run':<44} {'passes':>7}"]
    for row in rows:
        if row["stage"] in ("pretrain", "finetune"):
            passes = "?" if row["data_passes"] is None else f"{row['data_passes']:,.2f}"
            lines.append(f"{row['run_id']:<44} {passes:>7}")
    return "\n".join(lines)
