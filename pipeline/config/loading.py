"""Presets: load one (a built-in name or a YAML path), merge command-line overrides, validate against
``schema.yaml`` and the cross-references between its sections a schema cannot express (dataset, size, tokenizer, base
group, run ids, the downstream task folder); a malformed preset fails with one sentence naming the file, key and
expectation."""

import contextlib
import math
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from pipeline.config.families import DIFFEQ_FAMILIES, LLAMA_FAMILIES
from pipeline.config.grid import pretrain_runs
from pipeline.config.paths import PRESET_DIR, REPO_ROOT, SCHEMA_PATH


class ConfigError(ValueError):
    """A preset is malformed; the message is one sentence naming the file, the key and the expectation."""


# JSON Schema's "integer" admits integral floats (8.0, and 1e3 from --config); here an integer key takes ints only.
STRICT_VALIDATOR = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, instance: isinstance(instance, int) and not isinstance(instance, bool)
    ),
)


def deep_merge(base: dict, override: dict) -> dict:
    """Return ``base`` with ``override`` merged in recursively (override wins on leaves)."""
    merged = dict(base)  # a new mapping at every level merged into; the rest shared with base and override
    for key, value in override.items():
        both = isinstance(value, dict) and isinstance(merged.get(key), dict)
        merged[key] = deep_merge(merged[key], value) if both else value
    return merged


def typed_overrides(value: Any) -> Any:
    """Snakemake parses nested ``--config`` values with YAML's BaseLoader, so every leaf arrives as a string
    (``steps: 6`` as ``'6'``); read string leaves as YAML scalars so they get their intended types."""
    if isinstance(value, dict):
        return {key: typed_overrides(item) for key, item in value.items()}
    if isinstance(value, list):
        return [typed_overrides(item) for item in value]
    if isinstance(value, str) and value.strip():
        for read, error in ((int, ValueError), (float, ValueError), (yaml.safe_load, yaml.YAMLError)):
            with contextlib.suppress(error):
                return read(value)
    return value


def load_preset(cli_config: dict[str, Any] | None = None) -> dict[str, Any]:
    """Load the preset named by ``cli_config['preset']`` (default ``tiny``), merge the other keys over it, check it
    against the JSON schema and its cross-references (``ConfigError`` on the first problem), and return it."""
    overrides = typed_overrides(dict(cli_config or {}))
    preset = str(overrides.pop("preset", "tiny"))  # a name of presets/<name>.yaml, or a path taken as is
    path = Path(preset) if preset.endswith((".yaml", ".yml")) else PRESET_DIR / f"{preset}.yaml"
    if not path.is_file():
        raise ConfigError(
            f"{path}: key 'preset' names no preset file; expected one of "
            f"{sorted(p.stem for p in PRESET_DIR.glob('*.yaml'))} or a path to a .yaml file."
        )
    try:
        loaded = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: is not valid YAML ({error}).") from error
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: expected a mapping of config keys at the top level.")
    _check_builtin_name(path, loaded)
    config = deep_merge(loaded, overrides)
    source = f"{path} (with --config overrides {sorted(overrides)})" if overrides else str(path)
    check_schema(config, SCHEMA_PATH, source)
    if problem := cross_reference_problem(config):
        raise ConfigError(f"{source}: {problem}.")
    return config


def _leaves(value: Any, key: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, value) of every leaf of a loaded YAML document (list items by index; an empty mapping or list is
    a leaf)."""
    if not value or not isinstance(value, dict | list):
        yield key or "<top level>", value
        return
    for name, item in value.items() if isinstance(value, dict) else enumerate(value):
        yield from _leaves(item, f"{key}.{name}" if key else str(name))


def _check_builtin_name(path: Path, loaded: dict[str, Any]) -> None:
    """A preset's ``preset`` key names its results folder, ``results/<preset>/``. A file elsewhere that takes the
    name of a built-in preset but differs from it would rerun into, and overwrite, that preset's results."""
    name = loaded.get("preset")
    builtin = PRESET_DIR / f"{name}.yaml"
    if not isinstance(name, str) or not builtin.is_file() or path.resolve() == builtin.resolve():
        return
    expected, found = dict(_leaves(yaml.safe_load(builtin.read_text()))), dict(_leaves(loaded))
    for key in sorted(expected | found):
        if expected.get(key) != found.get(key):  # a key set to null reads as one left out
            raise ConfigError(
                f"{path}: key 'preset' is {name!r}, the built-in preset whose results are in results/{name}/, but "
                f"key {key!r} differs from {builtin}; give this file its own preset name (e.g. preset: my_{name}) "
                f"so that its results get their own folder."
            )


def check_schema(document: dict[str, Any], schema_path: Path, source: str, hint: str = "") -> None:
    """Check a loaded YAML ``document`` against the JSON schema at ``schema_path`` (integers strict, every number
    finite); raise ``ConfigError`` with one sentence naming ``source`` and the first problem's key, then ``hint``."""
    # NaN and ±inf (YAML .nan/.inf, nan/inf/1e400 on the command line): every range check is false for NaN.
    for key, value in _leaves(document):
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{source}: key {key!r} must be a finite number (got {value!r}){hint}.")
    schema = yaml.safe_load(schema_path.read_text())
    errors = sorted(STRICT_VALIDATOR(schema).iter_errors(document), key=lambda e: e.path)
    if errors:
        raise ConfigError(f"{source}: {schema_error_sentence(errors[0])}{hint}.")


def schema_error_sentence(error: jsonschema.ValidationError) -> str:
    """One sentence for the first schema error of a preset (inside ``oneOf``/``allOf``: of the alternative meant):
    which key, what was expected, what was found."""
    error = _best_error(error)
    key = ".".join(str(part) for part in error.absolute_path) or "<top level>"
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
        return (
            f"key {key!r} must be an integer (got {error.instance!r}; an integral float such as 8.0 or 1e3 is "
            f"refused, not rounded: write {int(error.instance)})"
        )
    if kind == "type":
        return f"key {key!r} must be of type {expected} (got {error.instance!r})"
    if kind == "enum":
        return f"key {key!r} must be one of {expected} (got {error.instance!r})"
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
        if not meant and consts:  # no alternative's kind: one enum of every kind, at the kind's key
            error = consts[0]
            error.validator, error.validator_value = "enum", sorted(c.validator_value for c in consts)
            return error
        error = jsonschema.exceptions.best_match(meant or list(error.context))
    return error


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
