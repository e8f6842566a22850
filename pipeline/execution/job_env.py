"""Every environment variable the workflow sets for its jobs and a job reads: their names, and the functions that
set and read them. The workflow exports them in its ``onstart`` (``workflow/rules/common.smk``), once its jobs are
about to run, never while it is read or dry-run: local jobs and SLURM jobs (sbatch hands on the submitting
environment) inherit them. Every export is idempotent: an environment that already holds it keeps it as it is. Ray
tasks get ``FORWARDED_ENV`` (``pipeline.execution.runner``)."""

from __future__ import annotations

import json
import os

RAY_PLACEMENT_ENV = {"address": "PIPELINE_RAY_ADDRESS", "num_cpus": "PIPELINE_RAY_NUM_CPUS"}
"""The preset's ``ray`` section: the cluster a job's Ray task joins, the CPUs of an embedded one."""
RAY_FRESH_PROCESS_ENV = "PIPELINE_RAY_FRESH_PROCESS"
"""Set (to 1) when the preset's ``ray.warm_workers`` is false: every job's task runs in a new Ray worker process."""
TRACKERS_ENV = "PIPELINE_TRACKERS"
"""The preset's ``tracker`` list, comma-separated."""
WANDB_ENV = "PIPELINE_WANDB"
"""The preset's ``wandb`` settings (project, entity, group, tags), as JSON."""
GPU_MEMORY_FRACTION_ENV = "XLA_PYTHON_CLIENT_MEM_FRACTION"
DEFAULT_GPU_MEMORY_FRACTION = 0.9
"""Share of each GPU's memory that JAX's allocator reserves when a job starts (JAX's own 0.75 would leave 20 GB of an
80 GB GPU unused); every Ray task runs with it and the fit table plans against it, unless the environment sets one."""
HUB_OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
"""The Hugging Face hub and ``datasets`` read the local cache only."""
FORWARDED_ENV = (
    "HF_HUB_OFFLINE",
    "RAY_AUTH_MODE",
    "HF_DATASETS_OFFLINE",
    "HF_HOME",
    "JAX_PLATFORMS",
    "XLA_FLAGS",
    "JAX_COMPILATION_CACHE_DIR",
    "PYTHONHASHSEED",
    TRACKERS_ENV,
    WANDB_ENV,
    "WANDB_MODE",
)
"""What a job hands on to its Ray task (a worker of an existing cluster does not inherit the job's environment)."""
NO_TORCH_ENV = {"USE_TORCH": "0"}
"""transformers' and ``datasets``' switch: they import no torch. A Ray task or a verb's process that never uses torch
runs with it and starts seconds sooner (results/benchmarks/test-tiers-2026-11-29.md)."""


def gpu_memory_fraction() -> float:
    """The share of GPU memory a job's JAX may use (``DEFAULT_GPU_MEMORY_FRACTION`` unless the environment sets it)."""
    return float(os.environ.get(GPU_MEMORY_FRACTION_ENV, DEFAULT_GPU_MEMORY_FRACTION))


def hub_offline() -> bool:
    """Whether this process must not reach the hub (``HF_HUB_OFFLINE`` or ``HF_DATASETS_OFFLINE`` set true)."""
    return any(os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"} for name in HUB_OFFLINE_ENV)


SLURM_CPU_COUNTS = ("SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE")
"""Where a SLURM job's CPUs are read, first found wins: the task's (``SLURM_CPUS_PER_TASK``, set where the job or
its step asked ``--cpus-per-task``, as the ``srun`` of Snakemake's SLURM job step does), else the job's CPUs on this
node (``SLURM_CPUS_ON_NODE``, set in every job: e.g. an ``sbatch`` script of one's own without ``-c``)."""


def slurm_allocation(environ: dict[str, str] | None = None) -> dict[str, int]:
    """The CPUs and GPUs of the SLURM job this process runs in (``SLURM_CPU_COUNTS``; ``CUDA_VISIBLE_DEVICES``,
    which SLURM sets to the allocated GPUs), for an embedded Ray that must not count the whole node's; empty
    outside a SLURM job."""
    environ = os.environ if environ is None else environ
    if "SLURM_JOB_ID" not in environ:
        return {}
    allocation = {}
    cpus = next((environ[name] for name in SLURM_CPU_COUNTS if environ.get(name, "").isdigit()), None)
    if cpus is not None:
        allocation["num_cpus"] = int(cpus)
    if "CUDA_VISIBLE_DEVICES" in environ:
        allocation["num_gpus"] = len([d for d in environ["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()])
    return allocation


def export_code_path(root: str) -> None:
    """Put the repository on every job's ``PYTHONPATH`` (once), so ``python -m pipeline`` in a job finds this
    checkout's code even where another checkout is pip-installed (a virtualenv shared between checkouts)."""
    paths = [path for path in os.environ.get("PYTHONPATH", "").split(os.pathsep) if path]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])


def export_xla_flags(flags: str) -> None:
    """Hand the preset's ``xla_flags`` to every job (and, through ``runner``, its Ray task) as ``XLA_FLAGS``,
    before any flags already in the environment (XLA takes the last value of a flag, so the user's win). Compile
    options, not arithmetic: a run's fingerprint does not include them."""
    if flags and not os.environ.get("XLA_FLAGS", "").startswith(flags):
        os.environ["XLA_FLAGS"] = " ".join(part for part in (flags, os.environ.get("XLA_FLAGS", "")) if part)


def export_trackers(names: list[str], wandb: dict) -> None:
    """Hand the preset's ``tracker`` list and ``wandb`` settings to every job (and its Ray task) as
    ``PIPELINE_TRACKERS`` and ``PIPELINE_WANDB`` (JSON); like Ray's placement, trackers observe a run without changing
    its weights, so they are not a rule param."""
    os.environ[TRACKERS_ENV] = ",".join(names)
    os.environ[WANDB_ENV] = json.dumps(wandb, sort_keys=True)


def export_ray_placement(ray: dict) -> None:
    """Hand the preset's ``ray`` section to every job through the environment (``ray.warm_workers: false`` as
    ``PIPELINE_RAY_FRESH_PROCESS=1``). Where Ray runs a job's work is
    not part of its result, so it is not a rule param (Snakemake reruns a job whose params changed)."""
    for key, name in RAY_PLACEMENT_ENV.items():
        if ray[key] is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = str(ray[key])
    if ray.get("warm_workers", True):
        os.environ.pop(RAY_FRESH_PROCESS_ENV, None)
    else:
        os.environ[RAY_FRESH_PROCESS_ENV] = "1"


def export_no_torch() -> None:
    """For a process that never uses torch and the Ray it starts: transformers and ``datasets`` import none (called
    before either is imported; a value already set wins)."""
    for name, value in NO_TORCH_ENV.items():
        os.environ.setdefault(name, value)


def export_hub(hf_home: str | None, offline: bool, hf_endpoint: str | None) -> None:
    """A site cache (``hf_home``) is every job's ``HF_HOME``; on offline compute nodes (``offline``) every job reads
    the Hugging Face hub from it only, the hub and ``datasets`` offline (the ``prefetch`` rule, on the submit host,
    lifts the offline flags for itself). With a hub mirror (``hf_endpoint``), whatever reaches the hub reaches it
    there (``HF_ENDPOINT``)."""
    if hf_home is not None:
        os.environ["HF_HOME"] = hf_home
    if offline:
        os.environ.update(HUB_OFFLINE_ENV)
    if hf_endpoint is not None:
        os.environ["HF_ENDPOINT"] = hf_endpoint
