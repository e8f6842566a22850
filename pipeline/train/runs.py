"""The Ray tasks of the ``pretrain`` and ``finetune`` verbs: one spec as a ``TrainJob``, trained by
``pipeline.train.loop``, and its ``summary.json`` written last. JAX and Levanter load only inside the task."""

import math
import time
from typing import Any

from pipeline.config import FinetuneSpec, RunSpec
from pipeline.train.loop import TrainJob, train_run
from pipeline.train.result import write_run_record


def pretrain(spec_json: str, run_dir: str, cache_dir: str, tokenizer_dir: str) -> dict[str, Any]:
    """Train one run for exactly ``spec.train.steps`` updates (resuming from checkpoints of the same fingerprint)
    and write its run folder."""
    started = time.time()
    spec = RunSpec.from_json(spec_json)
    job = TrainJob.pretraining(spec, run_dir, cache_dir, tokenizer_dir)
    result = train_run(job)
    fields = {
        "group": spec.group,
        "family": spec.model.family,
        "dataset": spec.dataset,
        "size": spec.size,
        "role": spec.role,
        "ablation": spec.ablation,
    }
    return write_run_record(spec, job.run_dir, started, result, fields)


def finetune(spec_json: str, run_dir: str, source_dir: str, cache_dir: str, tokenizer_dir: str) -> dict[str, Any]:
    """Fine-tune one resampled source on the target dataset (resuming from checkpoints of the same fingerprint, which
    includes the source run's); write the run folder."""
    started = time.time()
    spec = FinetuneSpec.from_json(spec_json)
    job = TrainJob.finetuning(spec, run_dir, source_dir, cache_dir, tokenizer_dir)
    result = train_run(job)
    fields = {
        "role": "finetune",
        "family": spec.family,
        "source_run": spec.source_run,
        "source_dataset": spec.source_dataset,
        "target_dataset": spec.target_dataset,
        "method": spec.method,
        "num_steps": spec.euler_steps or spec.source_euler_steps,
        "source_steps": spec.source_euler_steps,
        "trainable_parameters": result.trainable_parameters,
        "trainable_fraction": result.trainable_parameters / result.parameters,
        "initial_val_loss": result.initial_val_loss,
        "initial_val_ppl": None if result.initial_val_loss is None else math.exp(result.initial_val_loss),
    }
    return write_run_record(spec, job.run_dir, started, result, fields)
