"""Presets: load, validate and expand the experiment grid into typed run specs.

``specs`` (the typed run specs), ``loading`` (a preset file with ``--config`` overrides merged over it, validated),
``messages`` (one sentence per malformed key), ``grid`` (run ids and specs), ``references`` (the cross-references a
schema cannot express). The built-in presets (``presets/<name>.yaml``) and the schema (``schema.yaml``) are this
package's data.
"""

from pipeline.config.grid import finetune_eval_split, finetune_runs, memory_probes, pretrain_runs
from pipeline.config.loading import load_preset
from pipeline.config.messages import ConfigError
from pipeline.config.paths import PRESET_DIR, REPO_ROOT, SCHEMA_PATH
from pipeline.config.references import check_inside_results, downstream_task_dir
from pipeline.config.specs import FinetuneSpec, ModelSpec, RunSpec, TrainSpec
from pipeline.families import DIFFEQ_FAMILIES, LLAMA_FAMILIES

__all__ = [
    "DIFFEQ_FAMILIES",
    "LLAMA_FAMILIES",
    "PRESET_DIR",
    "REPO_ROOT",
    "SCHEMA_PATH",
    "ConfigError",
    "FinetuneSpec",
    "ModelSpec",
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
