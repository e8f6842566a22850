"""Verbs of the training stage: ``pretrain`` and ``finetune``, each one Ray task."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from pipeline.commands import absolute, add_ray_options, ray_placement


def _pretrain(args: argparse.Namespace) -> None:
    from pipeline.runner import run_on_ray
    from pipeline.train.pretrain import pretrain

    paths = absolute(args.run_dir, args.cache, args.tokenizer)
    summary = run_on_ray(pretrain, args.spec, *paths, **ray_placement(args))
    logging.info("pretrain finished: %s", json.dumps(summary))


def _finetune(args: argparse.Namespace) -> None:
    """The source's final checkpoint and fingerprint are checked here, before any Ray or JAX start-up (fail fast)."""
    from pipeline.models.checkpoint import final_checkpoint, read_run_spec
    from pipeline.runner import run_on_ray
    from pipeline.train.finetune import finetune
    from pipeline.train.identity import source_fingerprint

    read_run_spec(args.source)
    final_checkpoint(args.source)
    source_fingerprint(args.source)
    paths = absolute(args.run_dir, args.source, args.cache, args.tokenizer)
    summary = run_on_ray(finetune, args.spec, *paths, **ray_placement(args))
    logging.info("finetune finished: %s", json.dumps(summary))


def register(verbs: argparse._SubParsersAction) -> None:
    pretrain = verbs.add_parser("pretrain", help="train one run of the grid on Levanter, as a Ray task")
    pretrain.add_argument("--spec", required=True, help="the run's resolved RunSpec, as JSON")
    pretrain.add_argument("--run-dir", type=Path, required=True)
    pretrain.add_argument("--cache", type=Path, required=True)
    pretrain.add_argument("--tokenizer", type=Path, required=True)
    add_ray_options(pretrain, gpus=True)
    pretrain.set_defaults(run=_pretrain)

    finetune = verbs.add_parser("finetune", help="fine-tune a resampled source run on a target dataset, as a Ray task")
    finetune.add_argument("--spec", required=True, help="the fine-tune's resolved FinetuneSpec, as JSON")
    finetune.add_argument("--run-dir", type=Path, required=True)
    finetune.add_argument("--source", type=Path, required=True, help="the source run's folder")
    finetune.add_argument("--cache", type=Path, required=True, help="the target dataset's token cache")
    finetune.add_argument("--tokenizer", type=Path, required=True)
    add_ray_options(finetune, gpus=True)
    finetune.set_defaults(run=_finetune)
