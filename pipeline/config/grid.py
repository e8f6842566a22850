"""The experiment grid: a validated preset expanded into typed run specs, and the cross-references between its
sections that a schema cannot express.

``pretrain_runs`` expands a preset into one ``RunSpec`` per pretraining run, keyed by a readable run id
(``<group>-<family>``, ablations ``<base>-<ablation>_<variant>-<family>``); ``finetune_runs`` and
``memory_probes`` do the same for the fine-tunes of Fig. 5 and the memory probes of Fig. 16.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pipeline.config.families import DIFFEQ_FAMILIES, LLAMA_FAMILIES
from pipeline.config.messages import ConfigError
from pipeline.config.paths import REPO_ROOT
from pipeline.config.specs import FinetuneSpec, ModelSpec, RunSpec, TrainSpec


def check_inside_results(results_dir: str, paths: Iterable[str]) -> None:
    """Every output path must stay inside ``results_dir`` once ``..`` is resolved (lexically: a symlinked results
    folder is the user's choice); raise ``ConfigError`` naming the first that does not."""
    root = os.path.normpath(results_dir)
    for path in paths:
        if os.path.commonpath([root, os.path.normpath(path)]) != root:
            raise ConfigError(
                f"{path}: this output of preset {os.path.basename(root)!r} lies outside {root}/; "
                f"rename the preset key that names it (ids may use a-z, 0-9, '_', '.', '-')."
            )


def downstream_task_dir(config: dict[str, Any]) -> Path | None:
    """``downstream.task_dir`` as an absolute path (None: lm-eval's built-in tasks); a relative one is taken from the
    repository root, wherever Snakemake runs."""
    task_dir = config["downstream"]["task_dir"]
    return None if task_dir is None else Path(os.path.normpath(REPO_ROOT / task_dir))


def cross_reference_problem(config: dict[str, Any]) -> str | None:
    """References between sections (dataset, size, tokenizer, base group, run ids) must resolve."""
    datasets, sizes, tokenizers = config["datasets"], config["sizes"], config["tokenizers"]
    for name, tokenizer in tokenizers.items():
        for dataset in tokenizer.get("train_on", []):
            if dataset not in datasets:
                return (
                    f"key 'tokenizers.{name}.train_on' names unknown dataset {dataset!r}; "
                    f"expected one of {sorted(datasets)}"
                )
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
    finetune = config["finetune"]
    for direction in finetune["directions"]:
        for dataset in direction:
            if dataset not in datasets:
                return (
                    f"key 'finetune.directions' names unknown dataset {dataset!r}; expected one of {sorted(datasets)}"
                )
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
    for role in ("claim", "control"):
        labels = [
            label for label, regime in config["analysis"]["clustering"]["regimes"].items() if regime["role"] == role
        ]
        if len(labels) != 1:
            return (
                f"key 'analysis.clustering.regimes' has {len(labels)} regimes with role {role!r} ({labels}); "
                f"give exactly one regime that role"
            )
    for label, regime in config["analysis"]["clustering"]["regimes"].items():
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


def _model_spec(config: dict[str, Any], group: dict[str, Any], family: str, diffeq: dict[str, Any]) -> ModelSpec:
    shape = dict(config["sizes"][group["size"]])
    fidelity = config["fidelity"]
    if family not in LLAMA_FAMILIES:
        shape.pop("intermediate_dim", None)
    if family in DIFFEQ_FAMILIES:
        shape.update(diffeq, time_precision=fidelity["time_precision"], time_grid=fidelity["time_grid"])
    if family == "diffeq_llama":
        shape["llama_layer"] = fidelity["llama_layer"]
    return ModelSpec(family=family, init=fidelity["init"], **shape)


def _run_decay_mask(config: dict[str, Any], fine_tuning: bool) -> str:
    """A run's ``train.decay_mask`` (``pipeline.train.decay``) from ``fidelity.decay_mask``: ``reference`` decays as
    the authors' code that trained the run does, their pretraining code per family and their fine-tuning code (the
    fine-tunes and the fine-tunes' sources, ``fine_tuning``) every parameter; ``family`` and ``levanter`` apply to
    every run."""
    preset = config["fidelity"]["decay_mask"]
    if preset == "reference":
        return "all" if fine_tuning else "family"
    return preset


def _train_spec(config: dict[str, Any], *layers: dict[str, Any], fine_tuning: bool = False) -> TrainSpec:
    """The merged ``train`` sections (later ones win) and the run's ``decay_mask``."""
    merged = {key: value for layer in (config["defaults"]["train"], *layers) for key, value in layer.items()}
    return TrainSpec(**merged, decay_mask=_run_decay_mask(config, fine_tuning))


def run_seeds(config: dict[str, Any]) -> dict[str, int | None]:
    """Run-id suffix → seed of every run: ``{"": None}`` (ids and specs as the ``train`` sections say) without a
    ``seeds`` key, else ``{"-s<seed>": seed}`` per seed listed (a seed sets init, data order and dropout, so it is
    in the spec and hence the fingerprint)."""
    return {f"-s{seed}": seed for seed in config["seeds"]} if "seeds" in config else {"": None}


def _seeded(train: TrainSpec, seed: int | None) -> TrainSpec:
    return train if seed is None else dataclasses.replace(train, seed=seed)


def _group_runs(
    config: dict[str, Any],
    group_name: str,
    group: dict[str, Any],
    families: list[str],
    ablation: str | None,
    variant: dict[str, Any],
) -> dict[str, RunSpec]:
    train = _train_spec(
        config, group["train"], variant.get("train", {}), fine_tuning=group.get("role") == "finetune_source"
    )
    diffeq = {**config["defaults"]["diffeq"], **group.get("diffeq", {}), **variant.get("diffeq", {})}
    prefix = group_name if ablation is None else f"{group_name}-{ablation}"
    runs = {}
    for family in families:
        for suffix, seed in run_seeds(config).items():
            run_id = f"{prefix}-{family}{suffix}"
            runs[run_id] = RunSpec(
                run_id=run_id,
                preset=config["preset"],
                group=group_name,
                dataset=group["dataset"],
                size=group["size"],
                tokenizer=group["tokenizer"],
                role=group.get("role", "table") if ablation is None else "ablation",
                ablation=ablation,
                model=_model_spec(config, group, family, diffeq),
                train=_seeded(train, seed),
            )
    return runs


def pretrain_runs(config: dict[str, Any]) -> dict[str, RunSpec]:
    """Every pretraining run of the preset: the groups of Tables 1-2, fine-tune sources and ablations."""
    runs: dict[str, RunSpec] = {}
    for name, group in config["pretrain"].items():
        runs.update(_group_runs(config, name, group, group["families"], None, {}))
    for name, ablation in config["ablations"].items():
        base = config["pretrain"][ablation["base"]]
        for variant_name, variant in ablation["variants"].items():
            runs.update(
                _group_runs(config, ablation["base"], base, ablation["families"], f"{name}_{variant_name}", variant)
            )
    return runs


def memory_probes(config: dict[str, Any]) -> dict[str, RunSpec]:
    """Fig. 16's probes (App. D): the shape of group ``analysis.memory.base`` at ``batch_size``, once per D of
    ``time_embed_dims`` for each DiffEqFormer family (``<base>-memory_d<D>-<family>``) and once for each other
    family (``<base>-memory-<family>``). They are measured, not trained, so they are not pretraining runs (nor
    repeated per seed)."""
    config = {key: value for key, value in config.items() if key != "seeds"}
    probe = config["analysis"]["memory"]
    group = config["pretrain"][probe["base"]]
    batch = {"train": {"batch_size": probe["batch_size"]}}
    runs: dict[str, RunSpec] = {}
    for family in probe["families"]:
        variants = (
            {f"memory_d{d}": {**batch, "diffeq": {"time_embed_dim": d}} for d in probe["time_embed_dims"]}
            if family in DIFFEQ_FAMILIES
            else {"memory": batch}
        )
        for name, variant in variants.items():
            runs.update(_group_runs(config, probe["base"], group, [family], name, variant))
    return {run_id: dataclasses.replace(spec, role="memory_probe") for run_id, spec in runs.items()}


def _source_run(config: dict[str, Any], dataset: str, source: str, diffeq: bool, seed_suffix: str) -> RunSpec:
    group = f"{dataset}-{source}"
    family = next(f for f in config["pretrain"][group]["families"] if (f in DIFFEQ_FAMILIES) == diffeq)
    return pretrain_runs(config)[f"{group}-{family}{seed_suffix}"]


def finetune_eval_split(config: dict[str, Any], target_dataset: str) -> str:
    """The split a fine-tune into ``target_dataset`` is scored on: its test split with ``fidelity.eval_split: test``
    (docs/paper.md#fine-tune-test-split) where the dataset's source exports one (``test_split``; OpenWebText has
    none, so its held-out validation split), else validation."""
    has_test = config["datasets"][target_dataset]["source"].get("test_split", False)
    return "test" if config["fidelity"]["eval_split"] == "test" and has_test else "validation"


def finetune_runs(config: dict[str, Any]) -> dict[str, FinetuneSpec]:
    """Every fine-tune of Fig. 5: per direction and method, the DiffEqFormer source resampled to each N' (Euler
    steps) of ``steps_grid`` (``ft-<src>-<tgt>-diffeq<L>-n<N'>-<method>``) and the baseline
    (``ft-<src>-<tgt>-gpt<L>-<method>``), per seed (suffix ``-s<seed>``, the source of the same seed) when the
    preset lists ``seeds``."""
    finetune = config["finetune"]
    runs: dict[str, FinetuneSpec] = {}
    for (source_dataset, target_dataset), (suffix, seed) in itertools.product(
        finetune["directions"], run_seeds(config).items()
    ):
        train = _seeded(_train_spec(config, finetune["train"], fine_tuning=True), seed)
        diffeq = _source_run(config, source_dataset, finetune["diffeq_source"], True, suffix)
        baseline = _source_run(config, source_dataset, finetune["baseline_source"], False, suffix)
        variants = [(diffeq, f"diffeq{diffeq.model.num_layers}-n{n}", n) for n in finetune["steps_grid"]]
        variants.append((baseline, f"{baseline.model.family}{baseline.model.num_layers}", None))
        for method, options in finetune["methods"].items():
            for source, name, euler_steps in variants:
                run_id = f"ft-{source_dataset}-{target_dataset}-{name}-{method}{suffix}"
                runs[run_id] = FinetuneSpec(
                    run_id=run_id,
                    preset=config["preset"],
                    source_run=source.run_id,
                    source_dataset=source_dataset,
                    target_dataset=target_dataset,
                    tokenizer=source.tokenizer,
                    family=source.model.family,
                    source_euler_steps=source.model.num_layers,
                    euler_steps=euler_steps,
                    method=method,
                    lora_rank=options.get("rank"),
                    lora_init=config["fidelity"]["lora_init"] if method == "lora" else None,
                    train_embeddings=options.get("train_embeddings", True),
                    resampling=config["fidelity"]["resampling"],
                    eval_split=finetune_eval_split(config, target_dataset),
                    train=train,
                )
    return runs
