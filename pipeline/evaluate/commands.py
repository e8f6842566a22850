"""Verbs of the evaluation stage: ``downstream`` (lm-eval on one trained run, App. C.7), one Ray task."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from pipeline.commands import absolute, add_ray_options, ray_placement

BATCH_SIZE = 32
"""lm-eval requests scored per forward pass (``--batch-size``'s default; the rule passes none)."""


def _downstream(args: argparse.Namespace) -> None:
    from pipeline.evaluate.lm_eval_tasks import resolve_tasks

    task_dir = absolute(args.task_dir)[0] if args.task_dir else None
    resolve_tasks(args.tasks, task_dir)

    from pipeline.evaluate.harness import evaluate_downstream
    from pipeline.runner import run_on_ray

    summary = run_on_ray(evaluate_downstream, *absolute(args.run_dir, args.tokenizer, args.out_dir),
                         pair=args.pair, tasks=args.tasks, shots=args.shots, task_dir=task_dir, limit=args.limit,
                         batch_size=args.batch_size, uses_torch=True, **ray_placement(args))
    logging.info("downstream finished: %s", json.dumps(summary))


def register(verbs: argparse._SubParsersAction) -> None:
    downstream = verbs.add_parser("downstream", help="lm-eval tasks on one trained run (zero/few-shot), as a Ray task")
    downstream.add_argument("--run-dir", type=Path, required=True)
    downstream.add_argument("--tokenizer", type=Path, required=True)
    downstream.add_argument("--out-dir", type=Path, required=True,
                            help="gets lm_eval_<k>shot.json per shot count, then downstream.csv")
    downstream.add_argument("--pair", required=True, help="the model pair the run belongs to (a CSV column)")
    downstream.add_argument("--tasks", nargs="+", required=True, help="lm-eval task or group names")
    downstream.add_argument("--shots", nargs="+", type=int, required=True, help="few-shot counts, e.g. 0 5")
    downstream.add_argument("--task-dir", type=Path, default=None,
                            help="folder of lm-eval task YAMLs (default: lm-eval's built-in tasks)")
    downstream.add_argument("--limit", type=int, default=None, help="documents per task (default: all)")
    downstream.add_argument("--batch-size", type=int, default=BATCH_SIZE, help="requests per forward pass")
    add_ray_options(downstream, gpus=True)
    downstream.set_defaults(run=_downstream)
