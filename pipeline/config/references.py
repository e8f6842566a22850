"""The cross-references between a preset's sections that a schema cannot express (dataset, size, tokenizer, base
group, run ids, the downstream task folder)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pipeline.config.families import DIFFEQ_FAMILIES, LLAMA_FAMILIES
from pipeline.config.grid import pretrain_runs
from pipeline.config.paths import REPO_ROOT


def downstream_task_dir(config: dict[str, Any]) -> Path | None:
    """``downstream.task_dir`` as an absolute path (None: lm-eval's built-in tasks); a relative one is taken from the
    repository root, wherever Snakemake runs."""
    task_dir = config["downstream"]["task_dir"]
    return None if task_dir is None else Path(os.path.normpath(REPO_ROOT / task_dir))


def cross_reference_problem(config: dict[str, Any]) -> str | None:
    """References between sections (dataset, size, tokenizer, base group, run ids) must resolve."""
    datasets, sizes, tokenizers = config["datasets"], config["sizes"], config["tokenizers"]
    finetune = config["finetune"]
    named = [
        (f"tokenizers.{name}.train_on", dataset)
        for name, spec in tokenizers.items()
        for dataset in spec.get("train_on", [])
    ]
    named += [("finetune.directions", dataset) for direction in finetune["directions"] for dataset in direction]
    for key, dataset in named:
        if dataset not in datasets:
            return f"key {key!r} names unknown dataset {dataset!r}; expected one of {sorted(datasets)}"
    for group, spec in config["pretrain"].items():
        for key, table in (("dataset", datasets), ("size", sizes), ("tokenizer", tokenizers)):
            if spec[key] not in table:
                return f"key 'pretrain.{group}.{key}' is {spec[key]!r}; expected one of {sorted(table)}"
        llama = [family for family in spec["families"] if family in LLAMA_FAMILIES]
        if llama and "intermediate_dim" not in sizes[spec["size"]]:
            return f"key 'sizes.{spec['size']}.intermediate_dim' is required by the {llama[0]} run of group {group!r}"
    for name, ablation in config["ablations"].items():
        if ablation["base"] not in config["pretrain"]:
            return f"key 'ablations.{name}.base' is {ablation['base']!r}; expected a pretrain group"
    for direction in finetune["directions"]:
        for key, wanted in (("diffeq_source", "a DiffEqFormer"), ("baseline_source", "a non-DiffEqFormer")):
            group = f"{direction[0]}-{finetune[key]}"
            if group not in config["pretrain"]:
                return f"key 'finetune.{key}' needs pretrain group {group!r}, which the preset does not declare"
            families = config["pretrain"][group]["families"]
            if not any((family in DIFFEQ_FAMILIES) == (key == "diffeq_source") for family in families):
                return f"key 'finetune.{key}' names group {group!r}, which must train {wanted} family (has {families})"
    memory = config["analysis"]["memory"]
    base_families = config["pretrain"].get(memory["base"], {}).get("families")
    if base_families is None:
        return f"key 'analysis.memory.base' is {memory['base']!r}; expected a pretrain group"
    for family in memory["families"]:
        if family not in base_families:
            return (
                f"key 'analysis.memory.families' names {family!r}, which group {memory['base']!r} does not "
                f"train; expected some of {base_families}"
            )
    diffeq_families = [family for family in memory["families"] if family in DIFFEQ_FAMILIES]
    if len(diffeq_families) != 1:
        return (
            f"key 'analysis.memory.families' is {memory['families']}; expected exactly one DiffEqFormer family "
            f"(the one whose D varies) and optionally its baselines"
        )
    regimes = config["analysis"]["clustering"]["regimes"]
    for role in ("claim", "control"):
        labels = [label for label, regime in regimes.items() if regime["role"] == role]
        if len(labels) != 1:
            return (
                f"key 'analysis.clustering.regimes' has {len(labels)} regimes with role {role!r} ({labels}); "
                f"give exactly one regime that role"
            )
    for label, regime in regimes.items():
        if regime["dt"] > regime["horizon"]:
            return (
                f"key 'analysis.clustering.regimes.{label}.dt' is {regime['dt']}, larger than its horizon "
                f"{regime['horizon']}; give a step dt <= horizon"
            )
    runs = pretrain_runs(config)
    references = [(f"downstream.pairs.{pair}", ids) for pair, ids in config["downstream"]["pairs"].items()]
    references += [
        (f"analysis.{name}.runs", section["runs"]) for name, section in config["analysis"].items() if "runs" in section
    ]
    for key, ids in references:
        for run_id in ids:
            if run_id not in runs:
                return f"key {key!r} names unknown run {run_id!r}; expected a run id of the pretrain grid"
    lyapunov = config["analysis"]["lyapunov"]
    for run_id in lyapunov["runs"]:
        seq_len, token = runs[run_id].model.seq_len, lyapunov["output_token"]
        if not -seq_len <= token < seq_len:
            return (
                f"key 'analysis.lyapunov.output_token' is {token}; run {run_id!r} reads at most seq_len={seq_len} "
                f"tokens, so expected {-seq_len} to {seq_len - 1} (negative: from the sentence's end)"
            )
    return _task_dir_problem(config)


def _task_dir_problem(config: dict[str, Any]) -> str | None:
    """``downstream.task_dir`` is lm-eval code (its YAMLs may name Python functions with ``!function``): a relative
    path must stay inside the repository, an absolute one is the user's explicit choice; either must exist."""
    task_dir, folder = config["downstream"]["task_dir"], downstream_task_dir(config)
    if folder is None:
        return None
    if not Path(task_dir).is_absolute() and os.path.commonpath([REPO_ROOT, folder]) != str(REPO_ROOT):
        return (
            f"key 'downstream.task_dir' is {task_dir!r}, which leaves the repository; give a path inside it or "
            f"an absolute path"
        )
    if not folder.is_dir():
        return f"key 'downstream.task_dir' is {task_dir!r}, but {folder} is not a folder; expected lm-eval task YAMLs"
    return None
