"""Verbs of the evaluation stage: ``downstream`` (lm-eval on one trained run, App. C.7), one Ray task;
``lm-eval`` (lm-eval's own command line, with a trained run as model ``diffeqformer-run``); ``export-hf`` (a GPT-2
or Llama baseline in Hugging Face format); ``build-tasks`` (the tiny preset's shipped lm-eval tasks)."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from pipeline.commands import absolute, add_ray_options, ray_placement
from pipeline.evaluate import BATCH_SIZE


def _downstream(args: argparse.Namespace) -> None:
    """The task names are checked in the Ray task, before the model loads (lm-eval's task index costs ~9 CPU-s, which
    the driver would pay a second time)."""
    from pipeline.execution.runner import run_on_ray

    task_dir = absolute(args.task_dir)[0] if args.task_dir else None

    summary = run_on_ray(
        "pipeline.evaluate.harness:evaluate_downstream",
        *absolute(args.run_dir, args.tokenizer, args.out_dir),
        pair=args.pair,
        tasks=args.tasks,
        shots=args.shots,
        task_dir=task_dir,
        limit=args.limit,
        prefetched=absolute(*args.prefetched),
        batch_size=args.batch_size,
        uses_torch=True,
        **ray_placement(args),
    )
    logging.info("downstream finished: %s", json.dumps(summary))


def _prefetch_task(args: argparse.Namespace) -> None:
    from pipeline.artifacts import atomic_write_text
    from pipeline.evaluate.task_sources import prefetch_task

    record = prefetch_task(args.task, args.task_dir, json.loads(args.revisions))
    atomic_write_text(args.out, json.dumps(record, indent=2, sort_keys=True) + "\n")
    logging.info("prefetched lm-eval task %s: %s", args.task, json.dumps(record))


def _build_tasks(args: argparse.Namespace) -> None:
    from pipeline.evaluate.build_tasks import build_task_data

    print(json.dumps(build_task_data(args.out), indent=2))


def _lm_eval(args: argparse.Namespace) -> None:
    """lm-eval's CLI in this process, after ``pipeline.evaluate.harness`` registered the ``diffeqformer-run`` model.
    Multiprocessing is off: lm-eval's bootstrap would fork this multithreaded (JAX) process."""
    import os
    import sys

    from lm_eval.__main__ import cli_evaluate

    import pipeline.evaluate.harness  # noqa: F401  (registers the model)

    os.environ["DISABLE_MULTIPROC"] = "1"
    sys.argv = ["lm-eval", *args.lm_eval_args]
    cli_evaluate()


def _export_hf(args: argparse.Namespace) -> None:
    from pipeline.models.hf_export import export_run_hf

    logging.info("export-hf finished: %s", json.dumps(export_run_hf(args.run_dir, args.tokenizer, args.out_dir)))


def register(verbs: argparse._SubParsersAction) -> None:
    downstream = verbs.add_parser("downstream", help="lm-eval tasks on one trained run (zero/few-shot), as a Ray task")
    downstream.add_argument("--run-dir", type=Path, required=True)
    downstream.add_argument("--tokenizer", type=Path, required=True)
    downstream.add_argument(
        "--out-dir", type=Path, required=True, help="gets lm_eval_<k>shot.json per shot count, then downstream.csv"
    )
    downstream.add_argument("--pair", required=True, help="the model pair the run belongs to (a CSV column)")
    downstream.add_argument("--tasks", nargs="+", required=True, help="lm-eval task or group names")
    downstream.add_argument("--shots", nargs="+", type=int, required=True, help="few-shot counts, e.g. 0 5")
    downstream.add_argument(
        "--task-dir", type=Path, default=None, help="folder of lm-eval task YAMLs (default: lm-eval's built-in tasks)"
    )
    downstream.add_argument("--limit", type=int, default=None, help="documents per task (default: all)")
    downstream.add_argument("--batch-size", type=int, default=BATCH_SIZE, help="requests per forward pass")
    downstream.add_argument(
        "--prefetched",
        type=Path,
        action="append",
        default=[],
        help="a task's prefetch record: its hub datasets are read at the commits it holds",
    )
    add_ray_options(downstream, gpus=True)
    downstream.set_defaults(run=_downstream)

    prefetch = verbs.add_parser(
        "prefetch-task",
        help="download one lm-eval task's hub datasets at their pinned "
        "commits into the Hugging Face cache (on a host with network)",
    )
    prefetch.add_argument("--task", required=True, help="lm-eval task or group name")
    prefetch.add_argument("--task-dir", default=None, help="folder of lm-eval task YAMLs (default: built-in tasks)")
    prefetch.add_argument("--revisions", default="{}", help="hub dataset id -> commit (downstream.revisions), as JSON")
    prefetch.add_argument("--out", type=Path, required=True, help="its record: each dataset at which commit")
    prefetch.set_defaults(run=_prefetch_task)

    build = verbs.add_parser(
        "build-tasks",
        help="rebuild the tiny preset's lm-eval tasks from the validation splits "
        "of the shipped corpora (maintainers; byte-identical output)",
    )
    build.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent / "tasks",
        help="output folder (default: pipeline/evaluate/tasks)",
    )
    build.set_defaults(run=_build_tasks)

    # Every argument, --help included, is lm-eval's: this parser has no option prefix of its own.
    lm_eval = verbs.add_parser(
        "lm-eval",
        help="lm-eval's command line, with a trained run as model diffeqformer-run "
        "(--model_args run_dir=RUN_DIR,tokenizer=TOKENIZER_DIR)",
        prefix_chars="+",
        add_help=False,
    )
    lm_eval.add_argument("lm_eval_args", nargs=argparse.REMAINDER)
    lm_eval.set_defaults(run=_lm_eval)

    export_hf = verbs.add_parser("export-hf", help="a GPT-2 or Llama run's final checkpoint in Hugging Face format")
    export_hf.add_argument("run_dir", type=Path, help="the trained run's folder")
    export_hf.add_argument("out_dir", type=Path, help="gets config.json, model.safetensors and the tokenizer")
    export_hf.add_argument("--tokenizer", type=Path, required=True, help="the tokenizer the run was trained with")
    export_hf.set_defaults(run=_export_hf)
