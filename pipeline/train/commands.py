"""Verbs of the training stage: ``pretrain`` and ``finetune``, each one Ray task."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from pipeline.commands import absolute, add_ray_options, ray_placement


def _pretrain(args: argparse.Namespace) -> None:
    from pipeline.runner import run_on_ray

    paths = absolute(args.run_dir, args.cache, args.tokenizer)
    summary = run_on_ray("pipeline.train.pretrain:pretrain", args.spec, *paths, **ray_placement(args))
    logging.info("pretrain finished: %s", json.dumps(summary))


def _finetune(args: argparse.Namespace) -> None:
    """The source's run config, final checkpoint and fingerprint are checked here, before any Ray or JAX start-up
    (fail fast; the driver imports neither)."""
    from pipeline.artifacts import read_run_spec, require_complete_checkpoint
    from pipeline.runner import run_on_ray
    from pipeline.train.identity import recorded_fingerprint

    read_run_spec(args.source)
    require_complete_checkpoint(args.source)
    recorded_fingerprint(args.source)
    paths = absolute(args.run_dir, args.source, args.cache, args.tokenizer)
    summary = run_on_ray("pipeline.train.finetune:finetune", args.spec, *paths, **ray_placement(args))
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
