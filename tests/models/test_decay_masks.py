"""Which parameters the fine-tunes and their sources decay under ``fidelity.decay_mask: reference``, path by path
against the authors' fine-tuning code as tabulated in ``reference_decay_masks.csv`` (docs/paper.md#weight-decay; the
pretraining rule per family: ``test_fidelity.py``)."""

import re
from pathlib import Path

import equinox as eqx
import haliax as hax
import jax
import pandas as pd
import pytest
from levanter.utils.jax_utils import leaf_key_paths
from models_testkit import init_prng, tiny_model

from pipeline.config import finetune_runs, load_preset, pretrain_runs
from pipeline.train.finetune import resample, trainable_filter
from pipeline.train.setup import optimizer_config

TABLE = pd.read_csv(Path(__file__).with_name("reference_decay_masks.csv"), keep_default_na=False, dtype=str)
TINY_RUNS = {
    ("finetune_source", "diffeq"): "wt103-ft18-diffeq",
    ("finetune_source", "gpt"): "wt103-gpt24-gpt",
    ("lora", "diffeq"): "ft-wt103-owt-diffeq6-n3-lora",
    ("lora", "gpt"): "ft-wt103-owt-gpt8-lora",
    ("full", "diffeq"): "ft-wt103-owt-diffeq6-n3-full",
    ("full", "gpt"): "ft-wt103-owt-gpt8-full",
}
"""The tiny preset's run of each kind and family in the table."""


def trained_parameters(run: str, family: str, decay: str) -> dict[str, bool]:
    """Every trained parameter of the tiny preset's ``run`` kind (a tiny model of ``family``, resampled and wrapped
    as a fine-tune is) and whether the run's optimizer, with ``fidelity.decay_mask: decay``, decays it."""
    config = load_preset({"preset": "tiny", "fidelity": {"decay_mask": decay}})
    pretrain = pretrain_runs(config)
    specs = {**pretrain, **finetune_runs(config, pretrain)}
    spec = specs[TINY_RUNS[run, family]]
    model = tiny_model(family)
    if run in ("lora", "full"):
        with init_prng():
            model = eqx.filter_jit(resample)(spec, model, jax.random.PRNGKey(0))
        is_trainable = trainable_filter(spec)
        model = model if is_trainable is None else eqx.filter(model, is_trainable(model))
    params = eqx.filter(model, eqx.is_inexact_array)
    mask = optimizer_config(spec.train).build_weight_decay_mask()(params)
    is_leaf = lambda node: eqx.is_array(node) or hax.is_named_array(node)  # noqa: E731
    leaves = jax.tree_util.tree_leaves(params, is_leaf=is_leaf)
    paths = jax.tree_util.tree_leaves(leaf_key_paths(params, is_leaf=is_leaf))
    trained = [getattr(leaf, "array", leaf) is not None for leaf in leaves]
    return {
        path: decayed
        for path, decayed, is_trained in zip(paths, jax.tree_util.tree_leaves(mask), trained, strict=True)
        if is_trained
    }


@pytest.mark.parametrize("run, family", list(TINY_RUNS))
def test_reference_decay_is_the_authors_parameter_by_parameter(run, family):
    rows = TABLE[(TABLE["run"] == run) & (TABLE["family"] == family)]
    decided = trained_parameters(run, family, "reference")
    used = set()
    for path, decayed in decided.items():
        row = next((row for row in rows.itertuples() if re.fullmatch(row.parameters, path)), None)
        assert row is not None, f"{run} {family} trains {path}, which the table does not list"
        assert decayed == (row.decayed == "yes"), f"{run} {family}: {path} decayed={decayed}; table: {row}"
        used.add(row.parameters)
    assert used == set(rows["parameters"]), f"{run} {family} trains no parameter of some table rows"


def test_family_keeps_the_pretraining_rule_in_fine_tunes_and_their_sources():
    """``fidelity.decay_mask: family``: a resampled DiffEqFormer-GPT and its source decay their embeddings only."""
    for run in ("finetune_source", "lora", "full"):
        decided = trained_parameters(run, "diffeq", "family")
        assert {path for path, decayed in decided.items() if decayed} == {
            "embeddings.token_embeddings.weight",
            "embeddings.position_embeddings.weight",
        }
