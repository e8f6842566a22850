"""The mini preset: the paper's claims at a scale 2 CPU cores train within the study's budget, every compared
configuration at three or more seeds, each seed its own run id and fingerprint."""

import json
import re
from collections import defaultdict

import pytest
import yaml
from cli_testkit import dry_run

from pipeline.config import REPO_ROOT, finetune_runs, load_preset, pretrain_runs
from pipeline.config.paths import BENCHMARKS_DIR
from pipeline.planning.cost import preview
from pipeline.planning.grid import Grid
from pipeline.train.identity import RunIdentity

STUDY_BUDGET_S = 150 * 60
"""The whole mini study on 2 CPU cores: at most 2.5 hours (docs/experiments.md, "The mini study")."""
JOB_OVERHEAD_S = 30
"""Wall seconds a training job spends outside its train steps on 2 CPU cores (Ray task start, model set-up, the
first step's compile, the final evaluation): the cost preview counts train steps only."""
CPU_TABLE = BENCHMARKS_DIR / "throughput-sizes-cpu2.csv"


@pytest.fixture(scope="module")
def mini():
    return load_preset({"preset": "mini"})


def fake_data(root):
    """A tokenizer file and a token cache's ledgers: what a fingerprint reads besides the spec."""
    tokenizer, cache = root / "tokenizer", root / "cache"
    tokenizer.mkdir()
    (tokenizer / "tokenizer.json").write_text("{}")
    for split in ("train", "validation"):
        (cache / split).mkdir(parents=True)
        (cache / split / "shard_ledger.json").write_text(json.dumps({"total_num_rows": 1, "shard_rows": {}}))
    return tokenizer, cache


def test_every_compared_configuration_trains_at_three_seeds_with_distinct_fingerprints(mini, tmp_path):
    tokenizer, cache = fake_data(tmp_path)
    fingerprints = defaultdict(dict)
    pretrain = pretrain_runs(mini)
    runs = {**pretrain, **finetune_runs(mini, pretrain)}
    for run_id, spec in runs.items():
        configuration, seed = re.fullmatch(r"(.+)-s(\d+)", run_id).groups()
        assert spec.train.seed == int(seed)
        assert getattr(spec, "source_run", f"-s{seed}").endswith(f"-s{seed}")  # a fine-tune's source: same seed
        fingerprints[configuration][seed] = RunIdentity.of(spec, tokenizer, cache).fingerprint
    assert len(fingerprints) >= 5
    for configuration, by_seed in fingerprints.items():
        assert len(by_seed) >= 3, configuration
        assert len(set(by_seed.values())) == len(by_seed), configuration


def test_the_mini_study_fits_its_budget_by_the_cost_preview():
    """Every model is costed from the measured 2-core table; train steps plus each training job's overhead fit, with
    as many jobs side by side as the 2 cores hold Ray tasks of the preset's ``ray.num_cpus``."""
    config = load_preset({"preset": "mini"})
    stages, runs = preview(Grid.load(config), "cpu2", CPU_TABLE)
    assert {row["source"] for row in runs} == {"measured"}
    total = next(row for row in stages if row["stage"] == "total")
    training_jobs = sum(row["runs"] for row in stages if row["stage"] in ("pretrain", "finetune"))
    side_by_side = 2 // config["ray"]["num_cpus"]
    assert (total["gpu_hours"] * 3600 + JOB_OVERHEAD_S * training_jobs) / side_by_side <= STUDY_BUDGET_S


def test_ci_runs_the_tiny_dag_and_never_the_mini_study():
    """CI (.ci/run: pytest with profiles/ci) builds the tiny DAG only; the mini study, over 10x its compute (the
    preview's estimate on any one device), is run by hand. No test starts Snakemake on the mini preset."""
    ci = yaml.safe_load((REPO_ROOT / "profiles" / "ci" / "config.yaml").read_text())
    assert ci["config"] == ["preset=tiny"]
    hours = {
        preset: next(
            row for row in preview(Grid.load(load_preset({"preset": preset})), "h100")[0] if row["stage"] == "total"
        )["gpu_hours"]
        for preset in ("tiny", "mini")
    }
    assert hours["mini"] > 10 * hours["tiny"]
    tests = [path for path in (REPO_ROOT / "tests").rglob("*.py") if path.name != "test_mini_preset.py"]
    assert [path for path in tests if "preset=mini" in path.read_text()] == []


def test_the_mini_preset_gives_its_decidable_primary_claims_the_seeds_power_asks(mini):
    """Power before running (pipeline/report/power.py), on the OpenWebText stand-in's recorded spreads: at the
    Holm-corrected α, 80 % power for (1) better and non-inferior, (2) LoRA at N′ = L and claim (6)'s three parts
    (their 208 sweep seeds set by the interval's precision); (5) on its 0.114-nat spread and the rest are not tested
    by design."""
    from pipeline.report.power import CLUSTERING_PARTS, design_table

    design = design_table(mini).set_index("claim")
    decided = set(design.index[design["verdict by design"] == "decided"])
    assert decided == {
        "(1) better, owt-small",
        "(1) non-inferior, owt-small",
        "(2) lora N′=L, owt→wt103",
        *CLUSTERING_PARTS,
    }
    assert (design.loc[sorted(decided), "seeds in design"] >= design.loc[sorted(decided), "seeds for 80 % power"]).all()
    assert design.loc["(5) weight sharing is worse, owt-small", "per-seed sd"] == pytest.approx(0.114, abs=0.001)
    assert design["sd from"].str.contains("df 5").sum() >= 4


def test_the_mini_study_plans_in_a_dry_run_with_the_designed_grid(tmp_path):
    """CI never trains the mini study but plans it: the DAG resolves, with the power design's 18 pretraining runs
    (3 families × 12 seeds) and 36 LoRA fine-tunes (N′ = 2, 4 and GPT × 12 seeds)."""
    planned = dry_run(tmp_path, "--config", "preset=mini")
    assert planned.returncode == 0, planned.stderr[-2000:]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", planned.stdout, flags=re.M))
    assert counts["pretrain"] == "36" and counts["finetune"] == "36", planned.stdout[-3000:]
