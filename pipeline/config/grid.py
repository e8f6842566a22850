"""The experiment grid: a validated preset expanded into typed specs keyed by readable run ids (``<group>-<family>``,
ablations ``<base>-<ablation>_<variant>-<family>``): ``pretrain_runs``, ``finetune_runs`` (Fig. 5) and
``memory_probes`` (Fig. 16). Cross-references a schema cannot express: ``pipeline.config.loading``."""

import dataclasses
import itertools
from typing import Any

from pipeline.config.families import DIFFEQ_FAMILIES, LLAMA_FAMILIES
from pipeline.config.specs import FinetuneSpec, ModelSpec, RunSpec, TrainSpec


def _model_spec(config: dict[str, Any], group: dict[str, Any], family: str, diffeq: dict[str, Any]) -> ModelSpec:
    dimensions = dict(config["sizes"][group["size"]])
    fidelity = config["fidelity"]
    if family not in LLAMA_FAMILIES:
        dimensions.pop("intermediate_dim", None)
    if family in DIFFEQ_FAMILIES:
        dimensions.update(diffeq, time_precision=fidelity["time_precision"], time_grid=fidelity["time_grid"])
    if family == "diffeq_llama":
        dimensions["llama_layer"] = fidelity["llama_layer"]
    return ModelSpec(family=family, init=fidelity["init"], **dimensions)


def _train_spec(config: dict[str, Any], *layers: dict[str, Any], fine_tuning: bool = False) -> TrainSpec:
    """The merged ``train`` sections (later ones win) and ``train.decay_mask`` from ``fidelity.decay_mask``
    (docs/configuration.md#fidelity-choices): ``reference`` per family for pretraining, every parameter for
    ``fine_tuning`` (the fine-tunes and their sources); ``family`` and ``levanter`` for every run."""
    merged = {key: value for layer in (config["defaults"]["train"], *layers) for key, value in layer.items()}
    decay_mask = config["fidelity"]["decay_mask"]
    if decay_mask == "reference":
        decay_mask = "all" if fine_tuning else "family"
    return TrainSpec(**merged, decay_mask=decay_mask)


def _seed_layers(config: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Run-id suffix → ``train`` layer: ``{"": {}}`` without a ``seeds`` key, else ``{"-s<seed>": {"seed": seed}}``
    per seed (a seed sets init, data order and dropout, so it is in the spec and the fingerprint)."""
    return {f"-s{seed}": {"seed": seed} for seed in config["seeds"]} if "seeds" in config else {"": {}}


def _group_runs(
    config: dict[str, Any], group_name: str, families: list[str], ablation: str | None, variant: dict[str, Any]
) -> dict[str, RunSpec]:
    group = config["pretrain"][group_name]
    role, train_layers = group.get("role", "table"), (group["train"], variant.get("train", {}))
    diffeq = {**config["defaults"]["diffeq"], **group.get("diffeq", {}), **variant.get("diffeq", {})}
    prefix = group_name if ablation is None else f"{group_name}-{ablation}"
    runs = {}
    for family in families:
        for suffix, seed_layer in _seed_layers(config).items():
            run_id = f"{prefix}-{family}{suffix}"
            runs[run_id] = RunSpec(
                run_id=run_id,
                preset=config["preset"],
                group=group_name,
                dataset=group["dataset"],
                size=group["size"],
                tokenizer=group["tokenizer"],
                role=role if ablation is None else "ablation",
                ablation=ablation,
                model=_model_spec(config, group, family, diffeq),
                train=_train_spec(config, *train_layers, seed_layer, fine_tuning=role == "finetune_source"),
            )
    return runs


def pretrain_runs(config: dict[str, Any]) -> dict[str, RunSpec]:
    """Every pretraining run of the preset: the groups of Tables 1-2, fine-tune sources and ablations."""
    runs: dict[str, RunSpec] = {}
    for name, group in config["pretrain"].items():
        runs.update(_group_runs(config, name, group["families"], None, {}))
    for name, ablation in config["ablations"].items():
        for variant_name, variant in ablation["variants"].items():
            runs.update(_group_runs(config, ablation["base"], ablation["families"], f"{name}_{variant_name}", variant))
    return runs


def memory_probes(config: dict[str, Any]) -> dict[str, RunSpec]:
    """Fig. 16's probes (App. D): group ``analysis.memory.base``'s model at ``batch_size``, per D of
    ``time_embed_dims`` for each DiffEqFormer family (``<base>-memory_d<D>-<family>``) and once for each other
    (``<base>-memory-<family>``); measured, not trained, so not per seed."""
    config = {key: value for key, value in config.items() if key != "seeds"}
    probe = config["analysis"]["memory"]
    batch = {"train": {"batch_size": probe["batch_size"]}}
    runs: dict[str, RunSpec] = {}
    for family in probe["families"]:
        variants = (
            {f"memory_d{d}": {**batch, "diffeq": {"time_embed_dim": d}} for d in probe["time_embed_dims"]}
            if family in DIFFEQ_FAMILIES
            else {"memory": batch}
        )
        for name, variant in variants.items():
            runs.update(_group_runs(config, probe["base"], [family], name, variant))
    return {run_id: dataclasses.replace(spec, role="memory_probe") for run_id, spec in runs.items()}


def _source_run(
    config: dict[str, Any], runs: dict[str, RunSpec], dataset: str, source: str, diffeq: bool, seed_suffix: str
) -> RunSpec:
    group = f"{dataset}-{source}"
    family = next(f for f in config["pretrain"][group]["families"] if (f in DIFFEQ_FAMILIES) == diffeq)
    return runs[f"{group}-{family}{seed_suffix}"]


def finetune_eval_split(config: dict[str, Any], target_dataset: str) -> str:
    """The split a fine-tune into ``target_dataset`` is scored on: with ``fidelity.eval_split: test``, the test
    split where its source exports one (docs/paper.md#fine-tune-test-split), else validation."""
    has_test = config["datasets"][target_dataset]["source"].get("test_split", False)
    return "test" if config["fidelity"]["eval_split"] == "test" and has_test else "validation"


def finetune_runs(config: dict[str, Any], runs: dict[str, RunSpec]) -> dict[str, FinetuneSpec]:
    """Every fine-tune of Fig. 5 from ``runs`` (``pretrain_runs``): per direction and method, the DiffEqFormer source
    resampled to each N' of ``steps_grid`` (``ft-<src>-<tgt>-diffeq<L>-n<N'>-<method>``) and the baseline
    (``ft-<src>-<tgt>-gpt<L>-<method>``), per seed (``-s<seed>``, from the source of that seed)."""
    finetune = config["finetune"]
    finetunes: dict[str, FinetuneSpec] = {}
    for (source_dataset, target_dataset), (suffix, seed_layer) in itertools.product(
        finetune["directions"], _seed_layers(config).items()
    ):
        train = _train_spec(config, finetune["train"], seed_layer, fine_tuning=True)
        diffeq = _source_run(config, runs, source_dataset, finetune["diffeq_source"], True, suffix)
        baseline = _source_run(config, runs, source_dataset, finetune["baseline_source"], False, suffix)
        variants = [(diffeq, f"diffeq{diffeq.model.num_layers}-n{n}", n) for n in finetune["steps_grid"]]
        variants.append((baseline, f"{baseline.model.family}{baseline.model.num_layers}", None))
        for method, options in finetune["methods"].items():
            for source, name, euler_steps in variants:
                run_id = f"ft-{source_dataset}-{target_dataset}-{name}-{method}{suffix}"
                finetunes[run_id] = FinetuneSpec(
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
    return finetunes
