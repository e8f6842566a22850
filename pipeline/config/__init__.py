"""Presets: load and validate one (``loading``), expand its grid into typed run specs (``grid``, ``specs``), model
families (``families``) and SLURM site files (``site``); presets and schemas are this package's data."""

from pipeline.config.families import DIFFEQ_FAMILIES as DIFFEQ_FAMILIES
from pipeline.config.families import LLAMA_FAMILIES as LLAMA_FAMILIES
from pipeline.config.grid import finetune_eval_split as finetune_eval_split
from pipeline.config.grid import finetune_runs as finetune_runs
from pipeline.config.grid import memory_probes as memory_probes
from pipeline.config.grid import pretrain_runs as pretrain_runs
from pipeline.config.loading import ConfigError as ConfigError
from pipeline.config.loading import check_inside_results as check_inside_results
from pipeline.config.loading import downstream_task_dir as downstream_task_dir
from pipeline.config.loading import load_preset as load_preset
from pipeline.config.paths import REPO_ROOT as REPO_ROOT
from pipeline.config.paths import SCHEMA_PATH as SCHEMA_PATH
from pipeline.config.specs import FinetuneSpec as FinetuneSpec
from pipeline.config.specs import RunSpec as RunSpec
from pipeline.config.specs import TrainSpec as TrainSpec
