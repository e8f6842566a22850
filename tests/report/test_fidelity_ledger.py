"""The fidelity ledger stays in step with the presets and the code."""

import pytest
import yaml

from pipeline.config import SCHEMA_PATH, load_preset, pretrain_runs
from pipeline.report.fidelity import ledger, linked_rows, read_ledger


@pytest.mark.parametrize("preset", ["tiny", "paper"])
def test_every_row_reads_what_the_preset_runs(preset):
    config = load_preset({"preset": preset})
    table = ledger(config).set_index("id")
    assert (table["pipeline"] != "").all()
    runs = pretrain_runs(config)
    assert table.loc["beta2_large", "pipeline"] == str(runs["owt-large-gpt"].train.beta2)
    assert table.loc["beta2_llama", "pipeline"] == str(runs["owt-llama1b-diffeq_llama"].train.beta2)
    assert table.loc["init", "pipeline"].startswith(f"{runs['owt-large-gpt'].model.init}:")
    assert table.loc["decay_mask", "pipeline"].startswith(f"{config['fidelity']['decay_mask']}:")
    shared = sorted({(r.model.family, r.group) for r in runs.values() if r.model.family.startswith("shared")})
    groups = ("wt103-medium", "wt103-small")
    assert shared == [(family, group) for family in ("shared", "shared_ode") for group in groups]
    assert table.loc["weight_sharing", "pipeline"] == (
        "shared (wt103-small, wt103-medium): one sequential GPT-2 block reused L times, x_l = Block(x_{l-1}); "
        "shared_ode (wt103-small, wt103-medium): the ODE-style shared field "
        "x_l = x_{l-1} + dt·(Attn(LN1 x) + FF(LN2 x)), one set of weights, dt = 1/L"
    )


def test_the_weight_sharing_row_names_only_the_shared_designs_the_preset_trains():
    overrides = {group: {"families": ["gpt", "diffeq", "shared"]} for group in ("wt103-small", "wt103-medium")}
    config = load_preset({"preset": "tiny", "pretrain": overrides})
    assert ledger(config).set_index("id").loc["weight_sharing", "pipeline"] == (
        "shared (wt103-small, wt103-medium): one sequential GPT-2 block reused L times, x_l = Block(x_{l-1})"
    )


def test_every_fidelity_key_has_a_row_and_switching_it_changes_the_row():
    schema = yaml.safe_load(SCHEMA_PATH.read_text())["properties"]["fidelity"]["properties"]
    rows = read_ledger().set_index("key")
    assert {key.removeprefix("fidelity.") for key in rows.index if key.startswith("fidelity.")} == set(schema)
    default = ledger(load_preset({"preset": "tiny"})).set_index("key")["pipeline"]
    for name, values in schema.items():
        other = next(value for value in values["enum"] if not default[f"fidelity.{name}"].startswith(f"{value}:"))
        switched = ledger(load_preset({"preset": "tiny", "fidelity": {name: other}})).set_index("key")["pipeline"]
        assert switched[f"fidelity.{name}"].startswith(f"{other}:")


def test_scorecard_sources_link_to_the_rows_that_move_them():
    assert linked_rows("Fig. 5").split(", ") == [
        "init",
        "decay_mask",
        "time_grid",
        "time_precision",
        "resampling",
        "evaluate_at",
        "lora_init",
        "lora_trainable",
        "eval_split",
    ]
    assert linked_rows("Table 3") == "param_count"
    assert linked_rows("Fig. 2c/d, 13") == "clustering"
