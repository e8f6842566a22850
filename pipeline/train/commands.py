"""Verbs of the training stage: ``pretrain`` (and the fine-tunes), each one Ray task."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from pipeline.commands import absolute, add_ray_options


def _pretrain(args: argparse.Namespace) -> None:
    from pipeline.runner import run_on_ray
    from pipeline.train.pretrain import pretrain

    summary = run_on_ray(pretrain, args.spec, *absolute(args.run_dir, args.cache, args.tokenizer),
                         address=args.ray_address, num_cpus=args.ray_num_cpus, num_gpus=args.gpus)
    logging.info("pretrain finished: %s", json.dumps(summary))


def register(verbs: argparse._SubParsersAction) -> None:
    pretrain = verbs.add_parser("pretrain", help="train one run of the grid on Levanter, as a Ray task")
    pretrain.add_argument("--spec", required=True, help="the run's resolved RunSpec, as JSON")
    pretrain.add_argument("--run-dir", type=Path, required=True)
    pretrain.add_argument("--cache", type=Path, required=True)
    pretrain.add_argument("--tokenizer", type=Path, required=True)
    add_ray_options(pretrain, gpus=True)
    pretrain.set_defaults(run=_pretrain)
