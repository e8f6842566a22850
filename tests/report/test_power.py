"""The power design (pipeline/report/power.py): spreads from the stand-in the preset runs, seeds by precision."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pipeline.config import load_preset
from pipeline.report.power import design_table, planned_claims, precision_seeds


def recorded_study(path, spreads: dict[str, float]):
    """A scorecard CSV with six seeds' perplexities per group: GPT at 100, DiffEqFormer at a per-seed Δ log-ppl of
    sd ``spreads[group]``."""
    shape = np.array([-1.5, -0.5, 0.0, 0.2, 0.6, 1.2])
    shape = (shape - shape.mean()) / shape.std(ddof=1)
    rows = [
        {"section": "number", "item": f"{group}-{family}-s{seed} validation perplexity", "ours": ppl, "evidence": ""}
        for group, sd in spreads.items()
        for seed, delta in enumerate(shape * sd)
        for family, ppl in (("gpt", 100.0), ("diffeq", 100.0 * np.exp(delta)))
    ]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.mark.parametrize(("group", "sd"), [("owt-small", 0.114), ("wt103-small", 0.02)])
def test_the_power_design_reads_the_spread_of_the_stand_in_the_preset_runs(tmp_path, group, sd):
    """The recorded study has both stand-ins; a preset running one of them is planned with that one's spread (and
    says from how many seeds), never the other's."""
    study = recorded_study(tmp_path / "study.csv", {"owt-small": 0.114, "wt103-small": 0.02})
    mini = load_preset({"preset": "mini"})
    pretrain = {group: {**mini["pretrain"]["owt-small"], "dataset": group.split("-")[0]}}
    config = {**mini, "pretrain": pretrain, "finetune": None}
    plans = {plan.hypothesis: plan for plan in planned_claims(config, study)}
    better = plans[f"(1) better, {group}"]
    assert better.sd == pytest.approx(sd) and better.sd_seeds == 6 and "(6 seeds, df 5)" in better.sd_source
    assert plans[f"(1) non-inferior, {group}"].test == "non-inferiority"
    assert not any(
        hypothesis.endswith(("owt-small", "wt103-small")) and group not in hypothesis for hypothesis in plans
    )


def test_a_stand_in_the_study_did_not_record_is_not_powered(tmp_path):
    study = recorded_study(tmp_path / "study.csv", {"wt103-small": 0.02})
    table = design_table(load_preset({"preset": "mini"}), study).set_index("claim")
    assert np.isnan(table.loc["(1) better, owt-small", "per-seed sd"])
    assert table.loc["(1) better, owt-small", "verdict by design"] == "not tested at this scale"


def test_the_sweep_seeds_are_set_by_the_intervals_precision():
    """208 seeds: the 95 % Clopper–Pearson interval at 50 % is within ±0.07, 206 is not; the presets run 208."""
    for n, inside in ((208, True), (206, False)):
        interval = stats.binomtest(n // 2, n).proportion_ci(confidence_level=0.95, method="exact")
        assert (max(0.5 - interval.low, interval.high - 0.5) <= 0.07) == inside
    assert precision_seeds() == 208
    for preset in ("tiny", "mini", "paper"):
        assert load_preset({"preset": preset})["analysis"]["clustering"]["seeds"] == precision_seeds()
