"""Every environment variable the workflow sets for its jobs and a job reads, with their setters and readers. The
workflow exports them idempotently in its ``onstart`` (never on a dry run); local and SLURM jobs inherit them, Ray
tasks get ``FORWARDED_ENV``. They set where and how a job runs, not its result, so none is a rule param or part of a
run's fingerprint."""

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
TORCH_ENV = {"USE_TORCH": "AUTO"}
"""The same switch on, as both libraries default it: set where torch is used, since a process or a Ray worker may
inherit an off."""


def gpu_memory_fraction() -> float:
    """The share of GPU memory a job's JAX may use (``DEFAULT_GPU_MEMORY_FRACTION`` unless the environment sets it)."""
    return float(os.environ.get(GPU_MEMORY_FRACTION_ENV, DEFAULT_GPU_MEMORY_FRACTION))


def task_env(uses_torch: bool) -> dict[str, str]:
    """A Ray task's environment: the job's ``FORWARDED_ENV``, its GPU memory share, and torch on (``TORCH_ENV``) where
    it ``uses_torch``, else off (``NO_TORCH_ENV``)."""
    forwarded = {name: os.environ[name] for name in FORWARDED_ENV if name in os.environ}
    switch = TORCH_ENV if uses_torch else NO_TORCH_ENV
    return forwarded | {GPU_MEMORY_FRACTION_ENV: str(gpu_memory_fraction())} | switch


def hub_offline() -> bool:
    """Whether this process must not reach the hub (``HF_HUB_OFFLINE`` or ``HF_DATASETS_OFFLINE`` set true)."""
    return any(os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"} for name in HUB_OFFLINE_ENV)


SLURM_CPU_COUNTS = ("SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE")
"""Where a SLURM job's CPUs are read, first found wins: the task's (``SLURM_CPUS_PER_TASK``, set where the job or
its step asked ``--cpus-per-task``, as the ``srun`` of Snakemake's SLURM job step does), else the job's CPUs on this
node (``SLURM_CPUS_ON_NODE``, set in every job: e.g. an ``sbatch`` script of one's own without ``-c``)."""


def slurm_allocation(environ: dict[str, str] | None = None) -> dict[str, int]:
    """The CPUs and GPUs of the SLURM job this process runs in (``SLURM_CPU_COUNTS``, ``CUDA_VISIBLE_DEVICES``), so
    an embedded Ray does not count the whole node's; empty outside SLURM."""
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
    """The preset's ``xla_flags`` as ``XLA_FLAGS``, before any flags already set (XLA takes a flag's last value, so
    the user's win)."""
    if flags and not os.environ.get("XLA_FLAGS", "").startswith(flags):
        os.environ["XLA_FLAGS"] = " ".join(part for part in (flags, os.environ.get("XLA_FLAGS", "")) if part)


def export_trackers(names: list[str], wandb: dict) -> None:
    """The preset's ``tracker`` list and ``wandb`` settings as ``PIPELINE_TRACKERS`` and ``PIPELINE_WANDB`` (JSON)."""
    os.environ[TRACKERS_ENV] = ",".join(names)
    os.environ[WANDB_ENV] = json.dumps(wandb, sort_keys=True)


def export_ray_placement(ray: dict) -> None:
    """The preset's ``ray`` section (``ray.warm_workers: false`` as ``PIPELINE_RAY_FRESH_PROCESS=1``)."""
    values = {name: ray[key] for key, name in RAY_PLACEMENT_ENV.items()}
    values[RAY_FRESH_PROCESS_ENV] = None if ray.get("warm_workers", True) else 1
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = str(value)


def export_torch_switch(uses_torch: bool) -> None:
    """transformers' and ``datasets``' torch switch for this process, set before either is imported: on
    (``TORCH_ENV``) where it uses torch, else off (``NO_TORCH_ENV``; a value already set wins)."""
    for name, value in NO_TORCH_ENV.items():
        os.environ[name] = TORCH_ENV[name] if uses_torch else os.environ.get(name, value)


def export_hub(hf_home: str | None, offline: bool, hf_endpoint: str | None) -> None:
    """A site's ``hf_home`` as every job's ``HF_HOME``; ``offline``: the hub and ``datasets`` offline (the
    ``prefetch`` rule lifts that for itself); ``hf_endpoint``: ``HF_ENDPOINT``."""
    if hf_home is not None:
        os.environ["HF_HOME"] = hf_home
    if offline:
        os.environ.update(HUB_OFFLINE_ENV)
    if hf_endpoint is not None:
        os.environ["HF_ENDPOINT"] = hf_endpoint
