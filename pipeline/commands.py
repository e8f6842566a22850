"""What the stages' verbs share: a verb's parser, common options, running work as a Ray task, and the shared local
Ray of the workflow (``common.smk``). Not in ``cli``, which imports every stage's verbs."""

import argparse
import json
import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path

from pipeline.config.paths import REPO_ROOT
from pipeline.execution.driver_stop import child_processes, stop_jobs_on_signals
from pipeline.execution.job_env import RAY_FRESH_PROCESS_ENV, RAY_PLACEMENT_ENV
from pipeline.execution.local_ray import start_local_ray
from pipeline.execution.stop_signals import DRIVER_STOP_SIGNALS
from pipeline.planning.measured import DEFAULT_MFU

OPTIONS: dict[str, dict] = {
    "--preset": {"default": "paper", "help": "preset name or YAML path (default: paper)"},
    "--overrides": {
        "default": "{}",
        "help": "JSON of config keys merged over the preset, as snakemake's --config (default: none)",
    },
    "--run-dir": {"type": Path, "required": True, "help": "the run's folder (results/<preset>/runs/<run>)"},
    "--cache": {"type": Path, "required": True, "help": "the run's token cache"},
    "--tokenizer": {"type": Path, "required": True, "help": "the run's tokenizer folder"},
    "--site": {"help": "SLURM site settings (e.g. profiles/slurm/site.yaml): each job's GPUs and their memory"},
    "--mfu": {
        "type": float,
        "default": DEFAULT_MFU,
        "help": f"model FLOPs utilisation of the estimate ({DEFAULT_MFU})",
    },
    "--preflight": {
        "type": Path,
        "help": "the preset's preflight report, whose measured throughput wins over the throughput table and the "
        "estimate (default: <results>/<preset>/preflight.csv, where it exists)",
    },
}
"""The options several verbs take, by flag: ``add_argument``'s settings (``add_options``)."""


def add_verb(
    verbs: argparse._SubParsersAction, name: str, run: Callable, help: str, **defaults
) -> argparse.ArgumentParser:
    """The parser of the verb ``name`` (``python -m pipeline <name>``), whose work is ``run(args)``; ``defaults``
    are more of its namespace's defaults (``uses_torch=True``: its own process runs lm-eval or transformers' torch
    models; every other verb's process runs with ``job_env.NO_TORCH_ENV``, a Ray task with ``job_env.task_env``)."""
    verb = verbs.add_parser(name, help=help)
    verb.set_defaults(run=run, **defaults)
    return verb


def add_options(parser: argparse.ArgumentParser, *flags: str, **helps: str | None) -> None:
    """The shared options ``flags`` (``OPTIONS``), in that order; ``helps`` gives some the verb's own help, by
    destination (``run_dir`` for ``--run-dir``; None: the shared one)."""
    for flag in flags:
        settings = OPTIONS[flag]
        own = helps.get(flag.removeprefix("--").replace("-", "_"))
        parser.add_argument(flag, **(settings if own is None else {**settings, "help": own}))


def add_out_folder(parser: argparse.ArgumentParser, folder: Path) -> None:
    """``--out`` of a maintainers' verb that rebuilds files the package ships, by default in place (``folder``)."""
    parser.add_argument(
        "--out", type=Path, default=folder, help=f"output folder (default: {folder.relative_to(REPO_ROOT)})"
    )


def start_shared_local_ray(num_cpus: int) -> str:
    """Start one Ray runtime for a local DAG run in Snakemake's own process and return its address, which every
    job joins through ``PIPELINE_RAY_ADDRESS`` (tiny jobs: 2.6–6.2 s instead of 15–25 s with an embedded Ray).
    SIGTERM or SIGINT stops the jobs before Ray (``execution.driver_stop``)."""
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    import ray

    before_ray = {number: signal.getsignal(number) for number in DRIVER_STOP_SIGNALS}
    # Logical CPUs, twice Snakemake's cores (which bound the jobs running): room for idle warm workers of other
    # settings beside the running jobs' (warm_workers.WarmPool keeps at most one a CPU).
    context = start_local_ray(num_cpus=2 * num_cpus, log_to_driver=False)
    stop_jobs_on_signals(before_ray, spared=child_processes(os.getpid()), shutdown=ray.shutdown)
    address = context.address_info["gcs_address"]
    os.environ[RAY_PLACEMENT_ENV["address"]] = address
    os.environ.pop(RAY_PLACEMENT_ENV["num_cpus"], None)
    return address


def add_ray_options(parser: argparse.ArgumentParser, *, gpus: bool = False) -> None:
    """``--ray-address``/``--ray-num-cpus``/``--ray-fresh-process`` (defaults: their ``PIPELINE_RAY_*`` variables),
    and ``--gpus`` for a ``ray_task`` verb (a local DAG run starts its shared Ray for it, ``runs_a_ray_task``)."""
    num_cpus = os.environ.get(RAY_PLACEMENT_ENV["num_cpus"])
    parser.add_argument(
        "--ray-address",
        default=os.environ.get(RAY_PLACEMENT_ENV["address"]),
        help="existing Ray cluster ('auto' or host:port; default: $PIPELINE_RAY_ADDRESS)",
    )
    parser.add_argument(
        "--ray-num-cpus",
        type=int,
        default=int(num_cpus) if num_cpus else None,
        help="CPUs of the embedded local Ray (default: $PIPELINE_RAY_NUM_CPUS)",
    )
    parser.add_argument(
        "--ray-fresh-process",
        action="store_true",
        default=os.environ.get(RAY_FRESH_PROCESS_ENV) == "1",
        help="on an existing Ray, run the task in a new Ray worker process, not a warm worker "
        "(default: $PIPELINE_RAY_FRESH_PROCESS, set by the preset's ray.warm_workers: false)",
    )
    if gpus:
        parser.add_argument("--gpus", type=float, default=0, help="GPUs the Ray task asks for")
        parser.set_defaults(ray_task=True)


def run_task(args: argparse.Namespace, target: str, *arguments, fresh_process: bool = False, **keywords) -> dict:
    """``target(*arguments, **keywords)`` (``"module:function"``) as the verb's Ray task, placed by its
    ``add_ray_options(parser, gpus=True)`` arguments (``fresh_process``, for a job that measures its own process: a
    new Ray worker whatever the preset says); logs ``<verb> finished:`` and what the task returned, and returns it."""
    from pipeline.execution.runner import run_on_ray

    placement = {"address": args.ray_address, "num_cpus": args.ray_num_cpus, "num_gpus": args.gpus}
    fresh_process = fresh_process or args.ray_fresh_process
    summary = run_on_ray(target, *arguments, **keywords, **placement, fresh_process=fresh_process)
    logging.info("%s finished: %s", args.verb, json.dumps(summary))
    return summary


def absolute(*paths: Path) -> list[str]:
    """Paths as absolute strings: a worker of an existing Ray cluster runs in the cluster's directory, not ours."""
    return [str(Path(path).resolve()) for path in paths]
