"""Options shared by the stages' verbs (each stage declares its verbs in ``pipeline/<stage>/commands.py``), and the
local shared Ray the workflow starts for them. It stands at the package's root beside ``cli``: every stage's verb
module reads it, and so does ``workflow/rules/common.smk``."""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path

from pipeline.execution.driver_stop import child_processes, stop_jobs_on_signals
from pipeline.execution.job_env import RAY_FRESH_PROCESS_ENV, RAY_PLACEMENT_ENV
from pipeline.execution.local_ray import start_local_ray
from pipeline.execution.stop_signals import DRIVER_STOP_SIGNALS


def start_shared_local_ray(num_cpus: int) -> str:
    """One Ray runtime for a local DAG run, started in Snakemake's own process (it stops when Snakemake exits), its
    address handed to every job through ``PIPELINE_RAY_ADDRESS``: a job then joins it instead of starting an
    embedded Ray of its own (tiny pretraining jobs, side by side: 2.6–6.2 s against 15–25 s on a loaded 2-core
    machine, ``results/benchmarks/dag-subset-2026-11-23.md``). Each job stays its own Ray job (driver): its task,
    log and provenance are its own. SIGTERM or SIGINT to this process then stops the running jobs through their own
    stop path before Ray (``pipeline.execution.driver_stop``). Returns the address."""
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    import ray

    before_ray = {number: signal.getsignal(number) for number in DRIVER_STOP_SIGNALS}
    context = start_local_ray(num_cpus=num_cpus, log_to_driver=False)
    stop_jobs_on_signals(before_ray, spared=child_processes(os.getpid()), shutdown=ray.shutdown)
    address = context.address_info["gcs_address"]
    os.environ[RAY_PLACEMENT_ENV["address"]] = address
    os.environ.pop(RAY_PLACEMENT_ENV["num_cpus"], None)
    return address


def add_ray_options(parser: argparse.ArgumentParser, *, gpus: bool = False) -> None:
    """``--ray-address``/``--ray-num-cpus``/``--ray-fresh-process`` of a verb that may use Ray, and ``--gpus`` of one
    whose work runs as a Ray task (``ray_placement``; marked ``ray_task``, so that a local DAG run starts its shared
    Ray for it: ``pipeline.cli.runs_a_ray_task``). Their defaults come from ``PIPELINE_RAY_ADDRESS``/
    ``PIPELINE_RAY_NUM_CPUS``/``PIPELINE_RAY_FRESH_PROCESS``, which the workflow sets from the preset's ``ray`` section
    for every job."""
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


def ray_placement(args: argparse.Namespace, *, fresh_process: bool = False) -> dict:
    """``run_on_ray``'s placement keywords from a verb's ``add_ray_options(parser, gpus=True)`` arguments;
    ``fresh_process`` for a job that measures its own process (a new Ray worker whatever the preset says)."""
    return {
        "address": args.ray_address,
        "num_cpus": args.ray_num_cpus,
        "num_gpus": args.gpus,
        "fresh_process": fresh_process or args.ray_fresh_process,
    }


def absolute(*paths: Path) -> list[str]:
    """Paths as absolute strings: a worker of an existing Ray cluster runs in the cluster's directory, not ours."""
    return [str(Path(path).resolve()) for path in paths]
