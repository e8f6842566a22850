"""Verbs of the training stage: ``pretrain`` and ``finetune``, each one Ray task."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from pipeline.commands import absolute, add_ray_options, ray_placement
from pipeline.execution.errors import subject
from pipeline.train.attempts import recorded_attempt


def with_micro_batch(spec_json: str, micro_batch: int | None) -> str:
    """The spec (a run's or a fine-tune's, as JSON) with ``train.micro_batch_size`` set to ``micro_batch`` examples
    per device per forward/backward (0: the whole batch at once; None: the spec's own). Not part of the run's
    fingerprint (its role is ``EXECUTION``, ``pipeline.config.specs``); the run's config.yaml records the value
    trained with."""
    if micro_batch is None:
        return spec_json
    spec = json.loads(spec_json)
    spec["train"]["micro_batch_size"] = micro_batch or None
    return json.dumps(spec, sort_keys=True)


def _pretrain(args: argparse.Namespace) -> None:
    from pipeline.execution.runner import run_on_ray

    paths = absolute(args.run_dir, args.cache, args.tokenizer)
    spec = with_micro_batch(args.spec, args.micro_batch)
    with recorded_attempt(args.run_dir, args.attempt, subject("pretrain", args)):
        summary = run_on_ray("pipeline.train.runs:pretrain", spec, *paths, **ray_placement(args))
    logging.info("pretrain finished: %s", json.dumps(summary))


def _finetune(args: argparse.Namespace) -> None:
    """The source's run config, final checkpoint and fingerprint are checked here, before any Ray or JAX start-up
    (fail fast; the driver imports neither)."""
    from pipeline.artifacts import read_run_spec, require_complete_checkpoint
    from pipeline.execution.runner import run_on_ray
    from pipeline.train.identity import recorded_fingerprint

    read_run_spec(args.source)
    require_complete_checkpoint(args.source)
    recorded_fingerprint(args.source)
    paths = absolute(args.run_dir, args.source, args.cache, args.tokenizer)
    spec = with_micro_batch(args.spec, args.micro_batch)
    with recorded_attempt(args.run_dir, args.attempt, subject("finetune", args)):
        summary = run_on_ray("pipeline.train.runs:finetune", spec, *paths, **ray_placement(args))
    logging.info("finetune finished: %s", json.dumps(summary))


def _micro_batch(value: str) -> int:
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value!r}")
    return int(value)


def _add_job_options(verb: argparse.ArgumentParser) -> None:
    """``--micro-batch`` and ``--attempt`` of a training verb."""
    verb.add_argument(
        "--micro-batch",
        type=_micro_batch,
        default=None,
        help="examples per device per forward/backward (gradient accumulation to the same batch; "
        "0: the whole batch at once; default: the spec's train.micro_batch_size)",
    )
    verb.add_argument(
        "--attempt",
        type=int,
        default=1,
        help="Snakemake's attempt of this job (default 1: a new call, which always trains); a later attempt trains "
        "only where the one before it was stopped by its walltime or a preemption (pipeline.train.attempts)",
    )


def register(verbs: argparse._SubParsersAction) -> None:
    pretrain = verbs.add_parser("pretrain", help="train one run of the grid on Levanter, as a Ray task")
    pretrain.add_argument("--spec", required=True, help="the run's resolved RunSpec, as JSON")
    pretrain.add_argument("--run-dir", type=Path, required=True)
    pretrain.add_argument("--cache", type=Path, required=True)
    pretrain.add_argument("--tokenizer", type=Path, required=True)
    _add_job_options(pretrain)
    add_ray_options(pretrain, gpus=True)
    pretrain.set_defaults(run=_pretrain)

    finetune = verbs.add_parser("finetune", help="fine-tune a resampled source run on a target dataset, as a Ray task")
    finetune.add_argument("--spec", required=True, help="the fine-tune's resolved FinetuneSpec, as JSON")
    finetune.add_argument("--run-dir", type=Path, required=True)
    finetune.add_argument("--source", type=Path, required=True, help="the source run's folder")
    finetune.add_argument("--cache", type=Path, required=True, help="the target dataset's token cache")
    finetune.add_argument("--tokenizer", type=Path, required=True)
    _add_job_options(finetune)
    add_ray_options(finetune, gpus=True)
    finetune.set_defaults(run=_finetune)
