"""Verbs of the evaluation stage: ``downstream`` (lm-eval on one trained run, App. C.7), one Ray task;
``lm-eval`` (lm-eval's own command line, with a trained run as model ``diffeqformer-run``); ``export-hf`` (a GPT-2
or Llama baseline in Hugging Face format); ``build-tasks`` (the tiny preset's shipped lm-eval tasks)."""

import argparse
import json
import logging
from pathlib import Path

from pipeline.commands import absolute, add_options, add_out_folder, add_ray_options, add_verb, run_task
from pipeline.evaluate import BATCH_SIZE


def _downstream(args: argparse.Namespace) -> None:
    """The task names are checked in the Ray task, before the model loads (lm-eval's task index costs ~9 CPU-s, which
    the driver would pay a second time)."""
    options = {name: getattr(args, name) for name in ("pair", "tasks", "shots", "limit", "batch_size")}
    run_task(
        args,
        "pipeline.evaluate.harness:evaluate_downstream",
        *absolute(args.run_dir, args.tokenizer, args.out_dir),
        task_dir=absolute(args.task_dir)[0] if args.task_dir else None,
        prefetched=absolute(*args.prefetched),
        uses_torch=True,
        **options,
    )


def _prefetch_task(args: argparse.Namespace) -> None:
    from pipeline.artifacts import atomic_write_json
    from pipeline.evaluate.task_sources import prefetch_task

    record = prefetch_task(args.task, args.task_dir, json.loads(args.revisions))
    atomic_write_json(args.out, record)
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
    downstream = add_verb(
        verbs, "downstream", _downstream, "lm-eval tasks on one trained run (zero/few-shot), as a Ray task"
    )
    add_options(downstream, "--run-dir", "--tokenizer")
    downstream.add_argument(
        "--out-dir", type=Path, required=True, help="gets lm_eval_<k>shot.json per shot count, then downstream.csv"
    )
    downstream.add_argument("--pair", required=True, help="the model pair the run belongs to (a CSV column)")
    downstream.add_argument("--tasks", nargs="+", required=True, help="lm-eval task or group names")
    downstream.add_argument("--shots", nargs="+", type=int, required=True, help="few-shot counts, e.g. 0 5")
    downstream.add_argument(
        "--task-dir", type=Path, help="folder of lm-eval task YAMLs (default: lm-eval's built-in tasks)"
    )
    downstream.add_argument("--limit", type=int, help="documents per task (default: all)")
    downstream.add_argument("--batch-size", type=int, default=BATCH_SIZE, help="requests per forward pass")
    downstream.add_argument(
        "--prefetched",
        type=Path,
        action="append",
        default=[],
        help="a task's prefetch record: its hub datasets are read at the commits it holds",
    )
    add_ray_options(downstream, gpus=True)

    prefetch = add_verb(
        verbs,
        "prefetch-task",
        _prefetch_task,
        "download one lm-eval task's hub datasets at their pinned commits into the Hugging Face cache (on a host "
        "with network)",
        uses_torch=True,
    )
    prefetch.add_argument("--task", required=True, help="lm-eval task or group name")
    prefetch.add_argument("--task-dir", help="folder of lm-eval task YAMLs (default: built-in tasks)")
    prefetch.add_argument("--revisions", default="{}", help="hub dataset id -> commit (downstream.revisions), as JSON")
    prefetch.add_argument("--out", type=Path, required=True, help="its record: each dataset at which commit")

    build = add_verb(
        verbs,
        "build-tasks",
        _build_tasks,
        "rebuild the tiny preset's lm-eval tasks from the validation splits of the shipped corpora (maintainers; "
        "byte-identical output)",
    )
    add_out_folder(build, Path(__file__).resolve().parent / "tasks")

    # Every argument, --help included, is lm-eval's: this parser has no option prefix of its own.
    lm_eval = verbs.add_parser(
        "lm-eval",
        help="lm-eval's command line, with a trained run as model diffeqformer-run "
        "(--model_args run_dir=RUN_DIR,tokenizer=TOKENIZER_DIR)",
        prefix_chars="+",
        add_help=False,
    )
    lm_eval.add_argument("lm_eval_args", nargs=argparse.REMAINDER)
    lm_eval.set_defaults(run=_lm_eval, uses_torch=True)

    export_hf = add_verb(
        verbs,
        "export-hf",
        _export_hf,
        "a GPT-2 or Llama run's final checkpoint in Hugging Face format",
        uses_torch=True,
    )
    export_hf.add_argument("run_dir", type=Path, help="the trained run's folder")
    export_hf.add_argument("out_dir", type=Path, help="gets config.json, model.safetensors and the tokenizer")
    add_options(export_hf, "--tokenizer", tokenizer="the tokenizer the run was trained with")
