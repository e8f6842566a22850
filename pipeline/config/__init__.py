"""Presets: load and validate one (``loading``), expand its grid into typed run specs (``grid``, ``specs``), model
families (``families``) and SLURM site files (``site``); presets and schemas are this package's data."""

from pipeline.config.families import DIFFEQ_FAMILIES, LLAMA_FAMILIES
from pipeline.config.grid import finetune_eval_split, finetune_runs, memory_probes, pretrain_runs
from pipeline.config.loading import ConfigError, check_inside_results, downstream_task_dir, load_preset
from pipeline.config.paths import REPO_ROOT, SCHEMA_PATH
from pipeline.config.specs import FinetuneSpec, RunSpec, TrainSpec

__all__ = [
    "DIFFEQ_FAMILIES",
    "LLAMA_FAMILIES",
    "REPO_ROOT",
    "SCHEMA_PATH",
    "ConfigError",
    "FinetuneSpec",
    "RunSpec",
    "TrainSpec",
    "check_inside_results",
    "downstream_task_dir",
    "finetune_eval_split",
    "finetune_runs",
    "load_preset",
    "memory_probes",
    "pretrain_runs",
]
