"""The preflight's jobs after pretraining, one per kind: the resampled fine-tune (LoRA and full), one lm-eval job,
spectra, Lyapunov and frontier. Each reads the checkpoint of the preflight pretraining of its source run's shape
(``<preflight>/<shape>/train``, never a real run's) and runs the function its real verb runs, bounded:

- fine-tune: the source resampled (``pipeline.train.finetune.resampled_source``), then ``FINETUNE_UPDATES`` updates
  of the real loop with one evaluation and one checkpoint at the last; no run summary;
- lm-eval: ``pipeline.evaluate.harness.evaluate_downstream`` at ``limit`` ``LM_EVAL_LIMIT``, the first shot count;
- spectra and Lyapunov (its first sentence): their verbs' functions as they are;
- frontier: ``FRONTIER_BATCHES`` validation batch per solver and step count.

Each row holds the job's seconds of work (``wall_s``) and peak memory; the fine-tune also its step time and
tokens/s. A column that does not apply to a kind holds "n/a" (``report.NOT_APPLICABLE``).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from pipeline.config import finetune_runs
from pipeline.evaluate import BATCH_SIZE
from pipeline.planning.preflight_rows import FINETUNE_METHODS, finetune_stage

STAGE_KINDS = (*map(finetune_stage, FINETUNE_METHODS), "downstream", "spectra", "lyapunov", "frontier")
FINETUNE_UPDATES = 3
LM_EVAL_LIMIT = 2
FRONTIER_BATCHES = 1


@dataclasses.dataclass(frozen=True)
class StageJob:
    """One preflight job of ``kind``: it stands for the grid's jobs of that kind, ``run_id`` the first of them (a
    fine-tune id, else a pretraining run's), reading the preflight checkpoint of ``source_shape``."""

    kind: str
    run_id: str
    runs: int
    source_shape: str


def stage_jobs(config: dict[str, Any], run_shapes: dict[str, str]) -> dict[str, StageJob]:
    """The preset's stage jobs by kind (a kind the preset has no job of is left out); ``run_shapes``: each
    pretraining run's shape id."""
    jobs = {}
    for method in FINETUNE_METHODS:
        specs = [spec for spec in finetune_runs(config).values() if spec.method == method]
        if specs:
            jobs[finetune_stage(method)] = StageJob(
                finetune_stage(method), specs[0].run_id, len(specs), run_shapes[specs[0].source_run]
            )
    evaluated = [run for runs in config["downstream"]["pairs"].values() for run in runs if run in run_shapes]
    if evaluated:
        jobs["downstream"] = StageJob("downstream", evaluated[0], len(evaluated), run_shapes[evaluated[0]])
    for kind in ("spectra", "lyapunov", "frontier"):
        runs = [run for run in config["analysis"][kind]["runs"] if run in run_shapes]
        if runs:
            jobs[kind] = StageJob(kind, runs[0], len(runs), run_shapes[runs[0]])
    return jobs


def stage_gpus(job: StageJob, sizing) -> int:
    """The GPUs ``sizing`` (a ``pipeline.planning.jobs.JobSizing``) gives the grid's jobs of ``job``'s kind."""
    if job.kind.startswith("finetune-"):
        return sizing.training(job.run_id, check_preflight=False).gpus
    return sizing.gpu_analysis(job.kind, job.run_id, check_preflight=False).gpus


def measured_call(target: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """``target(*args, **kwargs)`` (``"module:function"``) timed, with the devices and the peak memory it left."""
    from pipeline.preflight.job import device_columns, peak_memory

    module, name = target.split(":")
    started = time.perf_counter()
    result = getattr(importlib.import_module(module), name)(*args, **kwargs)
    wall_s = time.perf_counter() - started
    peak_bytes, memory_source = peak_memory()
    measured = result if isinstance(result, dict) and "median_step_s" in result else {}
    return {
        **device_columns(),
        **measured,
        "wall_s": wall_s,
        "peak_memory_bytes": peak_bytes,
        "memory_source": memory_source,
    }


def preflight_finetune(
    spec_json: str, job_dir: str, source_dir: str, cache_dir: str, tokenizer_dir: str, micro_batch: int
) -> dict[str, Any]:
    """The fine-tune ``spec_json`` of the preflight source ``source_dir``: resampled, ``FINETUNE_UPDATES`` updates
    (module docstring); its step time, tokens/s and micro-batch."""
    from pipeline.artifacts import folder_bytes, read_metrics, read_run_spec
    from pipeline.config import FinetuneSpec
    from pipeline.train.finetune import resampled_source, trainable_filter
    from pipeline.train.identity import RunIdentity, stored_fingerprint
    from pipeline.train.loop import train_run

    source = Path(source_dir)
    source_spec = read_run_spec(source)
    spec = FinetuneSpec.from_json(spec_json)
    spec = dataclasses.replace(spec.bounded(FINETUNE_UPDATES, micro_batch), source_run=source_spec.run_id)
    train_dir = Path(job_dir) / "train"
    shutil.rmtree(train_dir, ignore_errors=True)
    train_dir.mkdir(parents=True)
    identity = RunIdentity.of(
        spec, Path(tokenizer_dir), Path(cache_dir), stored_fingerprint(source / "checkpoints"), preflight=True
    )
    train_run(
        spec.run_id,
        spec.train,
        source_spec.model.seq_len,
        train_dir,
        Path(cache_dir),
        Path(tokenizer_dir),
        lambda vocab, key: resampled_source(spec, source, vocab.size, key),
        identity,
        build_in_jit=False,
        trainable=trainable_filter(spec),
        eval_split=spec.eval_split,
    )
    records = read_metrics(train_dir / "metrics.jsonl")
    step_s = [r["step_s"] for r in records if "step_s" in r and r["step"] >= 1]  # the first update compiles
    split = next(r for r in records if "micro_batch" in r)
    median_step = statistics.median(step_s)
    tokens_per_s = spec.train.batch_size * source_spec.model.seq_len / median_step
    return {
        "median_step_s": median_step,
        "tokens_per_s": tokens_per_s,
        "tokens_per_s_per_device": tokens_per_s / device_count(),
        "micro_batch": split["micro_batch"],
        "gradient_accumulation": split["gradient_accumulation"],
        "timed_updates": len(step_s),
        "checkpoint_bytes": folder_bytes(train_dir / "checkpoints"),
    }


def device_count() -> int:
    import jax

    return len(jax.devices())


def stage_call(
    job: StageJob,
    settings: dict[str, Any],
    source_dir: str,
    job_dir: str,
    cache_dir: str,
    tokenizer_dir: str,
    micro_batch: int,
) -> tuple[str, list[Any], dict[str, Any]]:
    """(target, args, keyword args) of the function the real verb of ``job.kind`` runs, bounded (module docstring);
    ``settings``: the fine-tune's spec, or the preset's ``downstream`` or ``analysis.<kind>`` section."""
    out = Path(job_dir)
    if job.kind.startswith("finetune-"):
        return (
            "pipeline.preflight.stages:preflight_finetune",
            [json.dumps(settings), job_dir, source_dir, cache_dir, tokenizer_dir, micro_batch],
            {},
        )
    if job.kind == "downstream":
        return (
            "pipeline.evaluate.harness:evaluate_downstream",
            [source_dir, tokenizer_dir, str(out / "lm_eval")],
            {
                "pair": settings["pair"],
                "tasks": settings["tasks"],
                "shots": settings["shots"][:1],
                "task_dir": settings["task_dir"],
                "limit": LM_EVAL_LIMIT,
                "batch_size": BATCH_SIZE,
                "prefetched": settings["prefetched"],
            },
        )
    if job.kind == "spectra":
        return (
            "pipeline.analysis.spectra:run_spectra",
            [
                source_dir,
                tokenizer_dir,
                str(out / "spectra.csv"),
                settings["time_oversampling"],
                str(out / "spectra_untrained.csv"),
            ],
            {},
        )
    if job.kind == "lyapunov":
        return (
            "pipeline.analysis.lyapunov:run_lyapunov",
            [
                source_dir,
                tokenizer_dir,
                str(out / "lyapunov.csv"),
                str(out / "lyapunov.html"),
                settings["sentences"][:1],
                settings["output_token"],
            ],
            {},
        )
    return (
        "pipeline.analysis.frontier:run_frontier",
        [
            source_dir,
            cache_dir,
            tokenizer_dir,
            str(out / "frontier.csv"),
            settings["step_factors"],
            settings["solvers"],
            settings.get("batch_size", 32),
            FRONTIER_BATCHES,
        ],
        {},
    )
