"""Cost preview: the GPU-hours of every stage of a preset, before anything runs (docs/planning.md#cost-preview).

GPU-hours = tokens × passes / 3 / training tokens/s per GPU / 3600 (a forward-only token costs a third; wall-clock
= GPU-hours / GPUs), tokens/s measured (``pipeline.planning.measured``) or estimated from Levanter's FLOPs. Unless
measured, LoRA is costed as a full fine-tune (an upper bound: frozen weights skip their weight gradients, about a
third of the FLOPs)."""

import json
import math
from pathlib import Path
from typing import Any

from pipeline.artifacts import text_table
from pipeline.config import TrainSpec
from pipeline.config.site import preset_results
from pipeline.planning.grid import Grid, Workload
from pipeline.planning.measured import DEFAULT_MFU, MeasuredTable
from pipeline.train.checkpoints import KEPT_WHILE_TRAINING

PUBLISHED_TRAIN_TOKENS = {("dlwh/wikitext_103_detokenized", "gpt2"): 0.12e9, ("Skylion007/openwebtext", "gpt2"): 9.04e9}
"""Training tokens of the paper's corpora as published (docs/paper.md#exact-steps; OpenWebText: nanoGPT's
preparation), ``data_passes``' fallback before the caches are built; none for the Llama tokenizer."""
STAGES = ("pretrain", "finetune", "evaluate", "analysis")
CHECKPOINT_BYTES_PER_PARAMETER = 12
"""f32 parameters and Adam's two moments (for LoRA an upper bound: Levanter saves the trainable parameters only)."""


def checkpoint_disk(parameters: int, train: TrainSpec | None) -> dict[str, int]:
    """Checkpoint disk of a run trained as ``train`` (None: 0) (docs/runs.md#what-is-kept): ``checkpoint_bytes``, the
    final checkpoint plus the kept periodic ones (steps 0 < s < steps-1, multiples of lcm(``checkpoint_every``,
    ``keep_checkpoints_every``)); ``running_checkpoint_bytes``, those plus ``KEPT_WHILE_TRAINING`` while it trains."""
    if train is None:
        return {"checkpoint_bytes": 0, "running_checkpoint_bytes": 0}
    kept = 1
    if train.keep_checkpoints_every:
        kept += (train.steps - 2) // math.lcm(train.checkpoint_every, train.keep_checkpoints_every)
    each = parameters * CHECKPOINT_BYTES_PER_PARAMETER
    return {"checkpoint_bytes": each * kept, "running_checkpoint_bytes": each * (kept + KEPT_WHILE_TRAINING)}


def corpus_train_tokens(config: dict[str, Any], results: Path, dataset: str, tokenizer: str) -> float | None:
    """Training tokens of ``dataset`` under ``tokenizer``: its cache's count in ``results``, else the published one."""
    stats = results / "data" / "caches" / f"{dataset}-{tokenizer}" / "stats.json"
    if stats.is_file():
        return float(json.loads(stats.read_text())["train"]["tokens"])
    source = config["datasets"][dataset]["source"]
    return PUBLISHED_TRAIN_TOKENS.get((source.get("id"), config["tokenizers"][tokenizer].get("name")))


def cost_rows(workloads: list[Workload], measured: MeasuredTable, results: Path | None = None) -> list[dict[str, Any]]:
    """One row per run on ``measured``'s device: tokens, tokens/s per GPU and GPU-hours (``MeasuredTable.job``),
    passes over the data cached in ``results`` (default the repository's), checkpoint disk."""
    config = measured.grid.config
    results = results or preset_results(None, config["preset"])
    rows = []
    for workload in workloads:
        training = workload.trains
        corpus = corpus_train_tokens(config, results, workload.dataset, workload.tokenizer) if training else None
        parameters, tokens, job = workload.parameters, workload.tokens, measured.job(workload, required=True)
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
                "forward_flops_per_token": workload.forward_flops,
                "tokens": tokens,
                "passes": workload.passes,
                "tokens_per_s_per_gpu": job.tokens_per_s,
                "gpu_hours": job.gpu_hours,
                "source": job.source,
                "data_passes": tokens / corpus if corpus else None,
                **checkpoint_disk(parameters, workload.train if training else None),
            }
        )
    return rows


def stage_rows(run_rows: list[dict[str, Any]], analysis_runs: int) -> list[dict[str, Any]]:
    """Per stage: sums of ``run_rows``, the sources and the most data passes; the analyses (negligible); a total."""
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


def preflight_path(preset: str) -> Path:
    """The preflight report the cost preview reads by default (``results/<preset>/preflight.csv``)."""
    return preset_results(None, preset) / "preflight.csv"


def preview(
    grid: Grid, device: str, throughput: Path | None = None, mfu: float = DEFAULT_MFU, preflight: Path | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(stage rows, run rows) of ``grid`` on ``device``; tables by default the preset's report, the device's table."""
    if not 0 < mfu <= 1:
        raise ValueError(f"--mfu must be in (0, 1] (got {mfu}).")
    config = grid.config
    preflight = preflight or preflight_path(config["preset"])
    measured = MeasuredTable(grid, device, mfu=mfu, preflight_table=preflight, throughput_table=throughput)
    run_rows = cost_rows(grid.costed, measured)
    # the analysis stage's jobs: one per run of each per-run analysis, one per whole-preset analysis
    analyses = sum(len(section["runs"]) if "runs" in section else 1 for section in config["analysis"].values())
    return stage_rows(run_rows, analyses), run_rows


def format_stage_table(rows: list[dict[str, Any]]) -> str:
    """The stage rows as a fixed-width text table (tokens in billions, disk in GB)."""
    cells = []
    for row in rows:
        tokens = "negligible" if row["tokens"] is None else f"{row['tokens'] / 1e9:,.3f} B"
        hours = "~0" if row["gpu_hours"] is None else f"{row['gpu_hours']:,.1f}"
        passes = "-" if row["max_data_passes"] is None else f"{row['max_data_passes']:,.1f}"
        disk = f"{row['checkpoint_bytes'] / 1e9:,.1f}"
        cells.append((row["stage"], row["runs"], tokens, hours, passes, disk, row["source"]))
    columns = ("stage", "runs", "tokens", "GPU-hours", "max passes", "ckpt GB", "source")
    return text_table(columns, cells, "lrrrrrl", rule=True)


def format_passes_table(rows: list[dict[str, Any]]) -> str:
    """Passes over the training data per training run ("?": corpus size unknown until its cache is built)."""
    training = [row for row in rows if row["stage"] in ("pretrain", "finetune")]
    cells = [(row["run_id"], "?" if row["data_passes"] is None else f"{row['data_passes']:,.2f}") for row in training]
    return text_table(("run", "passes"), cells, "lr")
