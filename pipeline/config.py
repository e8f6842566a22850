"""Presets: load, validate and expand the experiment grid into typed run specs.

A preset (``workflow/config/<preset>.yaml``) declares the paper's grid (experiment-facts §3-7).
``load_preset`` merges command-line overrides onto it, validates it against
``workflow/schemas/config.schema.yaml`` plus the cross-references a schema cannot express, and
fails with one sentence naming the file, the key and what was expected. ``pretrain_runs``
expands it into one ``RunSpec`` per pretraining run, keyed by a readable run id
(``<group>-<family>``, ablations ``<base>-<ablation>_<variant>-<family>``).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from pipeline.families import DIFFEQ_FAMILIES, LLAMA_FAMILIES

REPO_ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = REPO_ROOT / "workflow" / "config"
SCHEMA_PATH = REPO_ROOT / "workflow" / "schemas" / "config.schema.yaml"

# JSON Schema's "integer" admits integral floats (8.0, and 1e3 from --config); here an integer key takes ints only.
STRICT_VALIDATOR = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, instance: isinstance(instance, int) and not isinstance(instance, bool)),
)


class ConfigError(ValueError):
    """A preset is malformed; the message is one sentence naming the file, the key and the expectation."""


@dataclasses.dataclass(frozen=True)
class TrainSpec:
    """Optimisation hyperparameters of one run (AdamW, warm-up then cosine decay to min_lr_ratio·lr)."""

    batch_size: int
    steps: int
    lr: float
    eval_every: int
    checkpoint_every: int
    eval_batches: int | None
    weight_decay: float
    beta1: float
    beta2: float
    epsilon: float
    warmup_fraction: float
    min_lr_ratio: float
    dropout: float
    mixed_precision: str
    seed: int
    decay_mask: str
    keep_checkpoints_every: int | None = None
    micro_batch_size: int | None = None
    """Examples per device per forward/backward (Levanter's ``per_device_parallelism``); the gradients of
    batch_size / (micro_batch_size × devices) micro-batches are accumulated. None: the whole batch at once."""


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """Architecture of one run: family and shape; time-embedding sizes D and S for DiffEqFormer (§4); the
    ``fidelity`` choices that shape its weights (init; e(t) precision and Llama layer where the family has them)."""

    family: str
    hidden_dim: int
    num_heads: int
    num_layers: int
    seq_len: int
    intermediate_dim: int | None = None
    time_embed_dim: int | None = None
    sinusoidal_dim: int | None = None
    shared_time_mlp: bool | None = None
    init: str = "reference"
    time_precision: str | None = None
    llama_layer: str | None = None


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """Everything one pretraining run needs, resolved from the preset."""

    run_id: str
    preset: str
    group: str
    dataset: str
    size: str
    tokenizer: str
    role: str
    ablation: str | None
    model: ModelSpec
    train: TrainSpec

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, raw: dict) -> RunSpec:
        return cls(**{**raw, "model": ModelSpec(**raw["model"]), "train": TrainSpec(**raw["train"])})


@dataclasses.dataclass(frozen=True)
class FinetuneSpec:
    """One step-resampling fine-tune (paper §6.2): a pretrained source run, resampled to ``num_steps`` = N'
    Euler steps (DiffEqFormer; ``None`` keeps a GPT baseline's depth), trained on the target dataset with
    ``method`` lora (rank ``lora_rank``, adapters initialised by ``lora_init``, adapters + embeddings trainable if
    ``train_embeddings``) or full; ``resampling`` says where dt' goes (``fidelity.resampling``); ``eval_split`` is
    the target split it is scored on (``fidelity.eval_split``)."""

    run_id: str
    preset: str
    source_run: str
    source_dataset: str
    target_dataset: str
    tokenizer: str
    family: str
    source_steps: int
    num_steps: int | None
    method: str
    lora_rank: int | None
    lora_init: str | None
    train_embeddings: bool
    resampling: str
    eval_split: str
    train: TrainSpec

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> FinetuneSpec:
        raw = json.loads(text)
        return cls(**{**raw, "train": TrainSpec(**raw["train"])})


def deep_merge(base: dict, override: dict) -> dict:
    """Return ``base`` with ``override`` merged in recursively (override wins on leaves)."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def typed_overrides(value: Any) -> Any:
    """Snakemake parses nested ``--config`` values with YAML's BaseLoader, so every leaf arrives as a string
    (``steps: 6`` as ``'6'``); read string leaves as YAML scalars so they get their intended types."""
    if isinstance(value, dict):
        return {key: typed_overrides(item) for key, item in value.items()}
    if isinstance(value, list):
        return [typed_overrides(item) for item in value]
    if isinstance(value, str):
        for number in (int, float):
            try:
                return number(value)
            except ValueError:
                pass
        try:
            return yaml.safe_load(value) if value.strip() else value
        except yaml.YAMLError:
            return value
    return value


def preset_path(preset: str) -> Path:
    """A preset name (``tiny``, ``paper``) maps to ``workflow/config/<name>.yaml``; a path is taken as is."""
    if preset.endswith((".yaml", ".yml")):
        return Path(preset)
    return CONFIG_DIR / f"{preset}.yaml"


def load_preset(cli_config: dict[str, Any] | None = None) -> dict[str, Any]:
    """Load the preset named by ``cli_config['preset']`` (default ``tiny``), merge the other keys over it,
    validate, and return the resolved config."""
    overrides = typed_overrides(dict(cli_config or {}))
    path = preset_path(str(overrides.pop("preset", "tiny")))
    if not path.is_file():
        raise ConfigError(
            f"{path}: key 'preset' names no preset file; expected one of "
            f"{sorted(p.stem for p in CONFIG_DIR.glob('*.yaml'))} or a path to a .yaml file."
        )
    try:
        loaded = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: is not valid YAML ({error}).") from error
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: expected a mapping of config keys at the top level.")
    problem = _builtin_name_problem(path, loaded)
    if problem:
        raise ConfigError(f"{path}: {problem}.")
    config = deep_merge(loaded, overrides)
    source = f"{path} (with --config overrides {sorted(overrides)})" if overrides else str(path)
    validate_config(config, source)
    return config


def _first_difference(expected: Any, found: Any, key: str = "") -> str | None:
    """The first key (dotted) whose value differs between two loaded YAML documents, or None if they are equal."""
    if isinstance(expected, dict) and isinstance(found, dict):
        for name in sorted(set(expected) | set(found), key=str):
            difference = _first_difference(expected.get(name), found.get(name), f"{key}.{name}" if key else str(name))
            if difference:
                return difference
        return None
    return None if expected == found else key or "<top level>"


def _builtin_name_problem(path: Path, loaded: dict[str, Any]) -> str | None:
    """A preset's ``preset`` key names its results folder, ``results/<preset>/``. A file elsewhere that takes the
    name of a built-in preset but differs from it would rerun into, and overwrite, that preset's results."""
    name = loaded.get("preset")
    builtin = CONFIG_DIR / f"{name}.yaml"
    if not isinstance(name, str) or not builtin.is_file() or path.resolve() == builtin.resolve():
        return None
    difference = _first_difference(yaml.safe_load(builtin.read_text()), loaded)
    if difference is None:
        return None
    return (f"key 'preset' is {name!r}, the built-in preset whose results are in results/{name}/, but key "
            f"{difference!r} differs from {builtin}; give this file its own preset name (e.g. preset: my_{name}) "
            f"so that its results get their own folder")


def check_inside_results(results_dir: str, paths: Iterable[str]) -> None:
    """Every output path must stay inside ``results_dir`` once ``..`` is resolved (lexically: a symlinked results
    folder is the user's choice); raise ``ConfigError`` naming the first that does not."""
    root = os.path.normpath(results_dir)
    for path in paths:
        if os.path.commonpath([root, os.path.normpath(path)]) != root:
            raise ConfigError(f"{path}: this output of preset {os.path.basename(root)!r} lies outside {root}/; "
                              f"rename the preset key that names it (ids may use a-z, 0-9, '_', '.', '-').")


def downstream_task_dir(config: dict[str, Any]) -> Path | None:
    """``downstream.task_dir`` as an absolute path (None: lm-eval's built-in tasks); a relative one is taken from the
    repository root, wherever Snakemake runs."""
    task_dir = config["downstream"]["task_dir"]
    return None if task_dir is None else Path(os.path.normpath(REPO_ROOT / task_dir))


def _key_path(error: jsonschema.ValidationError) -> str:
    return ".".join(str(part) for part in error.absolute_path) or "<top level>"


def _describe(error: jsonschema.ValidationError) -> str:
    """One sentence for a jsonschema error: which key, what was expected, what was found."""
    key = _key_path(error)
    kind, expected = error.validator, error.validator_value
    if kind == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - set(allowed))
        hint = f"expected one of {allowed}" if allowed else "expected no other keys"
        return f"unknown key {unknown[0]!r} under {key!r}; {hint}"
    if kind == "required":
        missing = [name for name in expected if name not in error.instance]
        return f"key {key!r} is missing required key {missing[0]!r}"
    if kind == "type" and isinstance(error.instance, float) and error.instance.is_integer() and "integer" in expected:
        return (f"key {key!r} must be an integer (got {error.instance!r}; an integral float such as 8.0 or 1e3 is "
                f"refused, not rounded: write {int(error.instance)})")
    if kind == "type":
        return f"key {key!r} must be of type {expected} (got {error.instance!r})"
    if kind == "enum":
        return f"key {key!r} must be one of {expected} (got {error.instance!r})"
    if kind == "const":
        return f"key {key!r} must be {expected!r} (got {error.instance!r})"
    if kind == "contains" and "const" in expected:
        return f"key {key!r} must contain {expected['const']!r} (got {error.instance!r})"
    bounds = {"minimum": "≥", "exclusiveMinimum": ">", "maximum": "≤", "exclusiveMaximum": "<"}
    if kind in bounds:
        return f"key {key!r} must be {bounds[kind]} {expected} (got {error.instance!r})"
    if kind == "pattern" and "propertyNames" in error.schema_path:
        return f"key {key!r} has an entry named {error.instance!r}; names must match {expected!r}"
    if kind == "pattern":
        return f"key {key!r} must match {expected!r} (got {error.instance!r})"
    if kind in ("minItems", "maxItems", "minProperties", "uniqueItems", "minLength"):
        return f"key {key!r} violates {kind}={expected} (got {error.instance!r})"
    return f"key {key!r}: {error.message}"


def _best_error(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """For a failed ``oneOf``/``allOf``, descend into the alternative the instance meant: alternatives are told
    apart by a ``kind`` constant, so those whose constant fails are not the one meant."""
    while error.validator in ("oneOf", "anyOf", "allOf") and error.context:
        consts = [e for e in error.context if e.validator == "const"]
        meant = [e for e in error.context if e.schema_path[0] not in {c.schema_path[0] for c in consts}]
        if not meant and consts:
            kinds = sorted(c.validator_value for c in consts)
            return jsonschema.ValidationError(f"must be one of {kinds} (got {consts[0].instance!r})",
                                              validator="enum", validator_value=kinds, instance=consts[0].instance,
                                              path=consts[0].absolute_path)
        error = jsonschema.exceptions.best_match(meant or list(error.context))
    return error


def validate_config(config: dict[str, Any], source: str) -> None:
    """Check ``config`` against the JSON schema and its cross-references; raise ``ConfigError`` on the first
    problem."""
    problem = _non_finite_problem(config)
    if problem:
        raise ConfigError(f"{source}: {problem}.")
    schema = yaml.safe_load(SCHEMA_PATH.read_text())
    errors = sorted(STRICT_VALIDATOR(schema).iter_errors(config), key=lambda e: e.path)
    if errors:
        raise ConfigError(f"{source}: {_describe(_best_error(errors[0]))}.")
    problem = _cross_reference_problem(config)
    if problem:
        raise ConfigError(f"{source}: {problem}.")


def _non_finite_problem(value: Any, key: str = "") -> str | None:
    """NaN and ±inf (YAML ``.nan``/``.inf``, ``nan``/``inf``/``1e400`` on the command line) are refused everywhere:
    every range check of the schema is false for NaN, so it would pass them."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"key {key or '<top level>'!r} must be a finite number (got {value!r})"
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for name, item in items:
        problem = _non_finite_problem(item, f"{key}.{name}" if key else str(name))
        if problem:
            return problem
    return None


def _cross_reference_problem(config: dict[str, Any]) -> str | None:
    """References between sections (dataset, size, tokenizer, base group, run ids) must resolve."""
    datasets, sizes, tokenizers = config["datasets"], config["sizes"], config["tokenizers"]
    for name, tokenizer in tokenizers.items():
        for dataset in tokenizer.get("train_on", []):
            if dataset not in datasets:
                return (f"key 'tokenizers.{name}.train_on' names unknown dataset {dataset!r}; "
                        f"expected one of {sorted(datasets)}")
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
                return (f"key 'finetune.directions' names unknown dataset {dataset!r}; "
                        f"expected one of {sorted(datasets)}")
        for key, wanted in (("diffeq_source", "a DiffEqFormer"), ("baseline_source", "a non-DiffEqFormer")):
            group = f"{direction[0]}-{finetune[key]}"
            if group not in config["pretrain"]:
                return f"key 'finetune.{key}' needs pretrain group {group!r}, which the preset does not declare"
            families = config["pretrain"][group]["families"]
            if (key == "diffeq_source") != any(family in DIFFEQ_FAMILIES for family in families):
                return f"key 'finetune.{key}' names group {group!r}, which must train {wanted} family (has {families})"
    memory = config["analysis"]["memory"]
    base_families = config["pretrain"].get(memory["base"], {}).get("families")
    if base_families is None:
        return f"key 'analysis.memory.base' is {memory['base']!r}; expected a pretrain group"
    for family in memory["families"]:
        if family not in base_families:
            return (f"key 'analysis.memory.families' names {family!r}, which group {memory['base']!r} does not "
                    f"train; expected some of {base_families}")
    diffeq_families = [family for family in memory["families"] if family in DIFFEQ_FAMILIES]
    if len(diffeq_families) != 1:
        return (f"key 'analysis.memory.families' is {memory['families']}; expected exactly one DiffEqFormer family "
                f"(the one whose D varies) and optionally its baselines")
    runs = pretrain_runs(config)
    references = [(f"downstream.pairs.{pair}", ids) for pair, ids in config["downstream"]["pairs"].items()]
    references += [(f"analysis.{name}.runs", section["runs"]) for name, section in config["analysis"].items()
                   if "runs" in section]
    for key, ids in references:
        for run_id in ids:
            if run_id not in runs:
                return f"key {key!r} names unknown run {run_id!r}; expected a run id of the pretrain grid"
    lyapunov = config["analysis"]["lyapunov"]
    for run_id in lyapunov["runs"]:
        seq_len, token = runs[run_id].model.seq_len, lyapunov["output_token"]
        if not -seq_len <= token < seq_len:
            return (f"key 'analysis.lyapunov.output_token' is {token}; run {run_id!r} reads at most seq_len={seq_len} "
                    f"tokens, so expected {-seq_len} to {seq_len - 1} (negative: from the sentence's end)")
    return _task_dir_problem(config)


def _task_dir_problem(config: dict[str, Any]) -> str | None:
    """``downstream.task_dir`` is lm-eval code (its YAMLs may name Python functions with ``!function``): a relative
    path must stay inside the repository, an absolute one is the user's explicit choice; either must exist."""
    task_dir, folder = config["downstream"]["task_dir"], downstream_task_dir(config)
    if folder is None:
        return None
    if not Path(task_dir).is_absolute() and os.path.commonpath([REPO_ROOT, folder]) != str(REPO_ROOT):
        return (f"key 'downstream.task_dir' is {task_dir!r}, which leaves the repository; give a path inside it or "
                f"an absolute path")
    if not folder.is_dir():
        return f"key 'downstream.task_dir' is {task_dir!r}, but {folder} is not a folder; expected lm-eval task YAMLs"
    return None


def _model_spec(config: dict[str, Any], group: dict[str, Any], family: str, diffeq: dict[str, Any]) -> ModelSpec:
    shape = dict(config["sizes"][group["size"]])
    fidelity = config["fidelity"]
    if family not in LLAMA_FAMILIES:
        shape.pop("intermediate_dim", None)
    if family in DIFFEQ_FAMILIES:
        shape.update(diffeq, time_precision=fidelity["time_precision"])
    if family == "diffeq_llama":
        shape["llama_layer"] = fidelity["llama_layer"]
    return ModelSpec(family=family, init=fidelity["init"], **shape)


def _train_spec(config: dict[str, Any], *layers: dict[str, Any]) -> TrainSpec:
    """The merged ``train`` sections (later ones win) and the preset's ``fidelity.decay_mask``."""
    merged = {key: value for layer in (config["defaults"]["train"], *layers) for key, value in layer.items()}
    return TrainSpec(**merged, decay_mask=config["fidelity"]["decay_mask"])


def _group_runs(config: dict[str, Any], group_name: str, group: dict[str, Any], families: list[str],
                ablation: str | None, variant: dict[str, Any]) -> dict[str, RunSpec]:
    train = _train_spec(config, group["train"], variant.get("train", {}))
    diffeq = {**config["defaults"]["diffeq"], **group.get("diffeq", {}), **variant.get("diffeq", {})}
    prefix = group_name if ablation is None else f"{group_name}-{ablation}"
    runs = {}
    for family in families:
        run_id = f"{prefix}-{family}"
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
            train=train,
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
            runs.update(_group_runs(config, ablation["base"], base, ablation["families"],
                                    f"{name}_{variant_name}", variant))
    return runs


def memory_probes(config: dict[str, Any]) -> dict[str, RunSpec]:
    """Fig. 16's probes (App. D): the shape of group ``analysis.memory.base`` at ``batch_size``, once per D of
    ``time_embed_dims`` for each DiffEqFormer family (``<base>-memory_d<D>-<family>``) and once for each other
    family (``<base>-memory-<family>``). They are measured, not trained, so they are not pretraining runs."""
    probe = config["analysis"]["memory"]
    group = config["pretrain"][probe["base"]]
    batch = {"train": {"batch_size": probe["batch_size"]}}
    runs: dict[str, RunSpec] = {}
    for family in probe["families"]:
        variants = ({f"memory_d{d}": {**batch, "diffeq": {"time_embed_dim": d}} for d in probe["time_embed_dims"]}
                    if family in DIFFEQ_FAMILIES else {"memory": batch})
        for name, variant in variants.items():
            runs.update(_group_runs(config, probe["base"], group, [family], name, variant))
    return {run_id: dataclasses.replace(spec, role="memory_probe") for run_id, spec in runs.items()}


def _source_run(config: dict[str, Any], dataset: str, source: str, diffeq: bool) -> RunSpec:
    group = f"{dataset}-{source}"
    family = next(f for f in config["pretrain"][group]["families"] if (f in DIFFEQ_FAMILIES) == diffeq)
    return pretrain_runs(config)[f"{group}-{family}"]


def finetune_eval_split(config: dict[str, Any], target_dataset: str) -> str:
    """The split a fine-tune into ``target_dataset`` is scored on: its test split with ``fidelity.eval_split: test``
    (experiment-facts §9.7) where the dataset's source exports one (``test_split``; OpenWebText has none, so its
    held-out validation split), else validation."""
    has_test = config["datasets"][target_dataset]["source"].get("test_split", False)
    return "test" if config["fidelity"]["eval_split"] == "test" and has_test else "validation"


def finetune_runs(config: dict[str, Any]) -> dict[str, FinetuneSpec]:
    """Every fine-tune of Fig. 5: per direction and method, the DiffEqFormer source resampled to each N' of
    ``steps_grid`` (``ft-<src>-<tgt>-diffeq<L>-n<N'>-<method>``) and the baseline
    (``ft-<src>-<tgt>-gpt<L>-<method>``)."""
    finetune = config["finetune"]
    train = _train_spec(config, finetune["train"])
    runs: dict[str, FinetuneSpec] = {}
    for source_dataset, target_dataset in finetune["directions"]:
        diffeq = _source_run(config, source_dataset, finetune["diffeq_source"], diffeq=True)
        baseline = _source_run(config, source_dataset, finetune["baseline_source"], diffeq=False)
        variants = [(diffeq, f"diffeq{diffeq.model.num_layers}-n{n}", n) for n in finetune["steps_grid"]]
        variants.append((baseline, f"{baseline.model.family}{baseline.model.num_layers}", None))
        for method, options in finetune["methods"].items():
            for source, name, num_steps in variants:
                run_id = f"ft-{source_dataset}-{target_dataset}-{name}-{method}"
                runs[run_id] = FinetuneSpec(
                    run_id=run_id,
                    preset=config["preset"],
                    source_run=source.run_id,
                    source_dataset=source_dataset,
                    target_dataset=target_dataset,
                    tokenizer=source.tokenizer,
                    family=source.model.family,
                    source_steps=source.model.num_layers,
                    num_steps=num_steps,
                    method=method,
                    lora_rank=options.get("rank"),
                    lora_init=config["fidelity"]["lora_init"] if method == "lora" else None,
                    train_embeddings=options.get("train_embeddings", True),
                    resampling=config["fidelity"]["resampling"],
                    eval_split=finetune_eval_split(config, target_dataset),
                    train=train,
                )
    return runs
