"""Every enum of the preset and site schemas against its Python twin (issue 37): the values a preset may write are the
values the code handles. A new enum fails ``test_every_schema_enum_has_a_python_twin`` until its twin is listed."""

from __future__ import annotations

import functools
import typing
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from pipeline.config import SCHEMA_PATH, finetune_runs, load_preset, pretrain_runs
from pipeline.config.site import SITE_SCHEMA


def schema_enums(node: Any, path: str = "") -> Iterator[tuple[str, list]]:
    """(dotted path, values) of every ``enum`` under ``node``; array items and ``additionalProperties`` as ``[]``."""
    if isinstance(node, dict):
        if "enum" in node:
            yield path, node["enum"]
        for key, child in node.items():
            step = {"items": "[]", "additionalProperties": "[]", "properties": "", "$defs": ""}.get(key, key)
            yield from schema_enums(child, ".".join(part for part in (path, step) if part))
    elif isinstance(node, list):
        for child in node:
            yield from schema_enums(child, path)


def fidelity_meanings(key: str) -> set[str]:
    from pipeline.report.fidelity import FIDELITY_MEANINGS

    return set(FIDELITY_MEANINGS[key])


@functools.cache
def twins() -> dict[str, tuple[set[str], ...]]:
    """Each schema enum's Python twins (each must hold the enum's values), by the enum's path."""
    from pipeline.analysis.clustering import MAGNITUDE_DEGREES, MAGNITUDE_FAMILIES, ROLES
    from pipeline.analysis.frontier import SOLVER_STAGES, STAGE_OFFSETS
    from pipeline.config.families import FAMILIES
    from pipeline.data.cache import Builder
    from pipeline.models import LLAMA_LAYERS
    from pipeline.models.discretize import LORA_INITS
    from pipeline.models.init import INIT_SCHEMES
    from pipeline.models.time_embedding import STEP_SCALINGS, TIME_GRIDS, TIME_PRECISIONS
    from pipeline.train.tracking import TRACKERS

    paper = pretrain_runs(load_preset({"preset": "paper"}))
    return {
        "family": (set(FAMILIES),),
        "cache_builder": (set(typing.get_args(Builder)),),
        "tracker.[]": (set(TRACKERS),),
        "fidelity.init": (set(INIT_SCHEMES), fidelity_meanings("init")),
        "fidelity.decay_mask": (fidelity_meanings("decay_mask"),),
        "fidelity.time_grid": (set(TIME_GRIDS), fidelity_meanings("time_grid")),
        "fidelity.time_precision": (set(TIME_PRECISIONS), fidelity_meanings("time_precision")),
        "fidelity.llama_layer": (set(LLAMA_LAYERS), fidelity_meanings("llama_layer")),
        "fidelity.resampling": (set(STEP_SCALINGS), fidelity_meanings("resampling")),
        "fidelity.lora_init": (set(LORA_INITS), fidelity_meanings("lora_init")),
        "fidelity.eval_split": (fidelity_meanings("eval_split"),),
        "pretrain.[].role": ({spec.role for spec in paper.values() if spec.ablation is None},),
        "analysis.clustering.magnitudes.[]": (set(MAGNITUDE_DEGREES),),
        "analysis.clustering.regimes.[].role": (set(ROLES),),
        "analysis.clustering.regimes.[].magnitude": (set(MAGNITUDE_FAMILIES),),
        "analysis.frontier.solvers.[]": (set(SOLVER_STAGES), set(STAGE_OFFSETS)),
    }


@functools.cache
def preset_enums() -> dict[str, list]:
    return dict(schema_enums(yaml.safe_load(SCHEMA_PATH.read_text())))


def test_every_schema_enum_has_a_python_twin():
    assert set(preset_enums()) == set(twins())
    assert dict(schema_enums(yaml.safe_load(SITE_SCHEMA.read_text()))) == {}, (
        "a site schema enum needs its twin in this test"
    )


@pytest.mark.parametrize("path", sorted(preset_enums()))
def test_a_schema_enum_holds_the_values_its_python_twin_handles(path):
    for twin in twins()[path]:
        assert set(preset_enums()[path]) == twin, path


def test_every_fidelity_decay_mask_resolves_to_a_mask_the_optimizer_knows():
    from pipeline.train.decay import DECAY_MASKS

    for choice in preset_enums()["fidelity.decay_mask"]:
        config = load_preset({"preset": "tiny", "fidelity": {"decay_mask": choice}})
        pretrain = pretrain_runs(config)
        runs = [*pretrain.values(), *finetune_runs(config, pretrain).values()]
        assert {spec.train.decay_mask for spec in runs} <= set(DECAY_MASKS), choice
