"""Verbs of the training stage: ``pretrain`` and ``finetune``, each one Ray task."""

import argparse
import json
from pathlib import Path

from pipeline.commands import absolute, add_options, add_ray_options, add_verb, run_task
from pipeline.execution.errors import subject
from pipeline.train.attempts import recorded_attempt


def with_micro_batch(spec_json: str, micro_batch: int | None) -> str:
    """The spec JSON with ``train.micro_batch_size`` = ``micro_batch`` examples per device per pass (0: the whole
    batch; None: the spec's own); an ``EXECUTION`` field, so not in the fingerprint."""
    if micro_batch is None:
        return spec_json
    spec = json.loads(spec_json)
    spec["train"]["micro_batch_size"] = micro_batch or None
    return json.dumps(spec, sort_keys=True)


def _train(args: argparse.Namespace, *folders: Path) -> None:
    """The verb's spec at its ``--micro-batch`` as one Ray task on absolute ``folders``, as attempt ``--attempt``."""
    spec = with_micro_batch(args.spec, args.micro_batch)
    with recorded_attempt(args.run_dir, args.attempt, subject(args.verb, args)):
        run_task(args, f"pipeline.train.runs:{args.verb}", spec, *absolute(*folders))


def _pretrain(args: argparse.Namespace) -> None:
    _train(args, args.run_dir, args.cache, args.tokenizer)


def _finetune(args: argparse.Namespace) -> None:
    """The source's run config, final checkpoint and fingerprint are checked here, before any Ray or JAX start-up
    (fail fast; the driver imports neither)."""
    from pipeline.artifacts import read_run_spec, require_complete_checkpoint
    from pipeline.train.identity import recorded_fingerprint

    read_run_spec(args.source)
    require_complete_checkpoint(args.source)
    recorded_fingerprint(args.source)
    _train(args, args.run_dir, args.source, args.cache, args.tokenizer)


def _micro_batch(value: str) -> int:
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value!r}")
    return int(value)


def register(verbs: argparse._SubParsersAction) -> None:
    pretrain = add_verb(verbs, "pretrain", _pretrain, "train one run of the grid on Levanter, as a Ray task")
    pretrain.add_argument("--spec", required=True, help="the run's resolved RunSpec, as JSON")
    finetune = add_verb(
        verbs, "finetune", _finetune, "fine-tune a resampled source run on a target dataset, as a Ray task"
    )
    finetune.add_argument("--spec", required=True, help="the fine-tune's resolved FinetuneSpec, as JSON")
    finetune.add_argument("--source", type=Path, required=True, help="the source run's folder")
    for verb, cache in ((pretrain, None), (finetune, "the target dataset's token cache")):
        add_options(verb, "--run-dir", "--cache", "--tokenizer", cache=cache)
        verb.add_argument(
            "--micro-batch",
            type=_micro_batch,
            help="examples per device per forward/backward (gradient accumulation to the same batch; "
            "0: the whole batch at once; default: the spec's train.micro_batch_size)",
        )
        verb.add_argument(
            "--attempt",
            type=int,
            default=1,
            help="Snakemake's attempt of this job (default 1: a new call, which always trains); a later attempt "
            "trains only where the one before it was stopped by its walltime or a preemption (pipeline.train.attempts)",
        )
        add_ray_options(verb, gpus=True)
