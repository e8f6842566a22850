"""Scorecard verdicts from synthetic runs: primary claims decided after Holm, claims the design cannot decide, controls
never scored, a single run never 'holds'; paper numbers per preset."""

import math

import numpy as np
import pandas as pd
import pytest
from contract_files import (
    table_files,
    write_downstream,
    write_finetune_run,
    write_memory_record,
    write_pretrain_run,
    write_spectra,
)

from pipeline.cli import main
from pipeline.report.analysis_claims import clustering_claims
from pipeline.report.finetune_claims import finetune_claims, load_finetunes, overfit_claims
from pipeline.report.intervals import CONTROL, EQUIVALENT, INCONCLUSIVE, NOT_TESTED, SENSITIVITY, SUPPORTED
from pipeline.report.scorecard import ScorecardInputs, decide, scorecard, write_scorecard
from pipeline.report.tables import write_perplexity_tables


@pytest.fixture
def runs_csv(tmp_path):
    """One run per configuration (the tiny preset's n = 1)."""
    paths = [
        write_pretrain_run(
            tmp_path,
            "owt-small-gpt",
            group="owt-small",
            size="small",
            family="gpt",
            ppl=100.0,
            tokens_per_s=1000.0,
            parameters=124_000_000,
        ),
        write_pretrain_run(
            tmp_path, "owt-small-diffeq", group="owt-small", size="small", family="diffeq", ppl=90.0, tokens_per_s=950.0
        ),
        write_pretrain_run(
            tmp_path, "wt103-small-gpt", group="wt103-small", size="small", family="gpt", ppl=100.0, tokens_per_s=1000.0
        ),
        write_pretrain_run(
            tmp_path, "wt103-small-shared", group="wt103-small", size="small", family="shared", ppl=120.0
        ),
    ]
    write_perplexity_tables(paths, out=table_files(tmp_path / "perplexity"))
    assert main(["runs-csv", "--out", str(tmp_path / "runs.csv"), *map(str, paths)]) == 0
    return tmp_path / "runs.csv"


def seeded_runs(tmp_path, seeds: int, diffeq_effect: float, shared_effect: float = 0.3) -> pd.DataFrame:
    """``seeds`` seeds of GPT, DiffEqFormer and the shared model on owt-small: a per-seed effect shared by the runs
    of a seed, DiffEqFormer's Δ log-ppl ``diffeq_effect`` plus noise of sd 0.01."""
    rng = np.random.default_rng(3)
    summaries = []
    for seed in range(seeds):
        base = 5.0 + rng.normal(0, 0.1)
        for family, shift in (
            ("gpt", 0.0),
            ("diffeq", diffeq_effect + rng.normal(0, 0.01)),
            ("shared", shared_effect + rng.normal(0, 0.01)),
        ):
            summaries.append(
                write_pretrain_run(
                    tmp_path,
                    f"owt-small-{family}-s{seed}",
                    group="owt-small",
                    size="small",
                    family=family,
                    ppl=float(np.exp(base + shift)),
                    seed=seed,
                )
            )
    write_perplexity_tables(summaries, out=table_files(tmp_path / "perplexity"))
    assert main(["runs-csv", "--out", str(tmp_path / "runs.csv"), *map(str, summaries)]) == 0
    return tmp_path / "runs.csv"


def by_item(card):
    return card.set_index("item")


def test_one_run_per_configuration_gets_no_interval_and_no_verdict(tmp_path, runs_csv):
    """n = 1: every claim (1)-(7) row is 'not tested at this scale', without interval or p; an accuracy of 0.00
    vs 0.00 is inconclusive, never 'holds'; memory (a measurement) is decided."""
    downstream = [
        write_downstream(
            tmp_path,
            "owt-small-gpt",
            family="gpt",
            pair="gpt-large",
            accuracy={("tiny_lambada", 0): 0.0, ("arc_easy", 0): 0.3603},
        ),
        write_downstream(
            tmp_path,
            "owt-small-diffeq",
            family="diffeq",
            pair="gpt-large",
            accuracy={("tiny_lambada", 0): 0.0, ("arc_easy", 0): 0.3582},
        ),
    ]
    memory = [
        write_memory_record(
            tmp_path,
            f"owt-medium-memory_d{d}-diffeq",
            family="diffeq",
            time_embed_dim=d,
            parameters=100_000 * d,
            peak_bytes=(40 + d) * 2**20,
        )
        for d in (4, 24, 12)
    ]
    card = scorecard(ScorecardInputs(preset="tiny", runs_csv=runs_csv, downstream=downstream, memory=memory))
    claims = card[card["item"].str.match(r"\(\d\)")]
    assert len(claims) >= 4 and set(claims["status"]) == {NOT_TESTED}
    assert claims["low"].isna().all() and claims["p"].isna().all() and claims["p_holm"].isna().all()
    assert claims["evidence"].str.contains("n = 1: no interval, no verdict").all()
    assert "holds" not in set(card.loc[card["section"] == "claim", "status"])
    lambada = by_item(card).loc["accuracy ≥ baseline on tiny_lambada, gpt-large, 0-shot"]
    assert lambada["status"] == INCONCLUSIVE and lambada["p"] == 1.0
    memory_claim = by_item(card).loc["peak memory grows less than the parameter count with D"]
    assert memory_claim["status"] == SUPPORTED and memory_claim["deviation"] == pytest.approx(64 / 44 - 6)
    number = by_item(card).loc["gpt-large arc_easy 0-shot baseline"]
    assert number["status"] == "not run at this preset" and number["ours"] == pytest.approx(36.03)


def test_paper_preset_compares_numbers_within_two_combined_stderr(tmp_path, runs_csv):
    downstream = [
        write_downstream(
            tmp_path,
            "owt-small-gpt",
            family="gpt",
            pair="gpt-large",
            accuracy={("arc_easy", 0): 0.3603},
            n_samples=2376,
        ),
        write_downstream(
            tmp_path,
            "owt-small-diffeq",
            family="diffeq",
            pair="gpt-large",
            accuracy={("arc_easy", 0): 0.30},
            n_samples=2376,
        ),
    ]
    card = by_item(scorecard(ScorecardInputs(preset="paper", runs_csv=runs_csv, downstream=downstream)))
    assert card.loc["gpt-large arc_easy 0-shot baseline", "status"] == "holds"
    assert card.loc["gpt-large arc_easy 0-shot DiffEqFormer", "status"] == "does not hold"
    assert card.loc["gpt-large arc_easy 0-shot DiffEqFormer", "deviation"] == pytest.approx(30.0 - 35.82)
    assert card.loc["GPT small parameters", "status"] == "holds"
    assert card.loc["gpt-large lambada_openai 0-shot baseline", "status"] == "not run at this preset"


def test_scorecard_files_show_p_holm_and_the_family(tmp_path, runs_csv):
    write_scorecard(
        ScorecardInputs(preset="tiny", runs_csv=runs_csv), out=table_files(tmp_path / "scorecard", tex=False)
    )
    card = pd.read_csv(tmp_path / "scorecard.csv")
    assert {"p", "p_holm"} <= set(card.columns)
    assert set(card["section"]) == {"claim", "number"} and (card["section"] == "number").sum() >= 88 + 4
    markdown = (tmp_path / "scorecard.md").read_text()
    assert "## Claims" in markdown and "## Numbers" in markdown and "Holm family (0 rows" in markdown
    assert "Verdict rule:" in (tmp_path / "scorecard.html").read_text()


def test_seeded_claims_are_decided_after_holm_and_equivalence_is_scored(tmp_path):
    """20 seeds, DiffEqFormer within 0.01 nats of GPT: (1) 'comparable' is equivalent (TOST), 'better' is not
    supported; sharing is worse (supported). Each is in the Holm family and has its adjusted p."""
    card = by_item(scorecard(ScorecardInputs(preset="mini", runs_csv=seeded_runs(tmp_path, 20, 0.0))))
    comparable = card.loc["(1) DiffEqFormer comparable to GPT (±0.05 nats, TOST), owt-small"]
    assert comparable["status"] == EQUIVALENT and comparable["p_holm"] < 0.05
    better = card.loc["(1) DiffEqFormer better than GPT, owt-small"]
    assert better["status"] == INCONCLUSIVE and better["p_holm"] >= better["p"]
    sharing = card.loc["(5) weight sharing is worse: Shared parameter, owt-small"]
    assert sharing["status"] == SUPPORTED and sharing["low"] > 0
    assert math.isnan(card.loc["(7) throughput only slightly below GPT, owt-small", "p_holm"])
    assert card.loc["(7) throughput only slightly below GPT, owt-small", "status"] == NOT_TESTED


def test_a_primary_claim_short_of_its_seeds_is_not_tested_by_design(tmp_path):
    """3 seeds cannot power (1) on a 0.044-nat spread at 0.10 nats: a clear per-seed win reads 'not tested at this
    scale' with its p shown; sharing (sd 0.005) is powered and decided."""
    card = by_item(scorecard(ScorecardInputs(preset="mini", runs_csv=seeded_runs(tmp_path, 3, -0.3))))
    better = card.loc["(1) DiffEqFormer better than GPT, owt-small"]
    assert better["status"] == NOT_TESTED and better["p"] < 0.05 and math.isnan(better["p_holm"])
    assert card.loc["(5) weight sharing is worse: Shared parameter, owt-small", "status"] == SUPPORTED


def test_finetune_claims_count_only_curves_that_plateaued(tmp_path):
    """LoRA at N′ = L/2 and L against GPT over 6 seeds: N′ = L with plateaued curves is primary (a hypothesis of
    the family), N′ = L/2 whose curves still fall is not tested at this scale."""
    paths = []
    for seed in range(6):
        for n, flat in ((2, 0), (4, 3)):
            paths.append(
                write_finetune_run(
                    tmp_path,
                    f"ft-diffeq4-n{n}-lora-s{seed}",
                    family="diffeq",
                    source="owt",
                    target="wt103",
                    method="lora",
                    num_steps=n,
                    source_steps=4,
                    ppl=400.0 - seed,
                    seed=seed,
                    flat_tail=flat,
                )
            )
        paths.append(
            write_finetune_run(
                tmp_path,
                f"ft-gpt4-lora-s{seed}",
                family="gpt",
                source="owt",
                target="wt103",
                method="lora",
                num_steps=4,
                source_steps=4,
                ppl=500.0 + seed,
                seed=seed,
                flat_tail=3,
            )
        )
    rows = {row["item"]: row for row in finetune_claims(load_finetunes(paths))}
    at_depth = rows["(2) lora DiffEqFormer N′=4 beats GPT, owt→wt103"]
    assert at_depth["hypothesis"] == "(2) lora N′=L" and "12 of 12 curves plateaued" in at_depth["evidence"]
    half = rows["(2) lora DiffEqFormer N′=2 beats GPT, owt→wt103"]
    assert half["hypothesis"] is None and half["status"] == NOT_TESTED
    assert "6 of 12 curves plateaued" in half["evidence"]
    decided, _ = decide(list(rows.values()))
    assert {row["item"]: row["status"] for row in decided}[
        "(2) lora DiffEqFormer N′=4 beats GPT, owt→wt103"
    ] == SUPPORTED


def test_a_spearman_over_three_values_gets_no_verdict(tmp_path):
    """(3): six seeds all at ρ = 0.5 over N′ = 2, 4, 6 (a sign test would call p = 0.031): reported, not decided."""
    paths = [
        write_finetune_run(
            tmp_path,
            f"ft-full-n{n}-s{seed}",
            family="diffeq",
            source="owt",
            target="wt103",
            method="full",
            num_steps=n,
            source_steps=4,
            ppl=400.0,
            seed=seed,
        )
        for seed in range(6)
        for n in (2, 4, 6)
    ]
    finetunes = load_finetunes(paths)
    finetunes["overfit"] = finetunes["num_steps"].map({2: 0.0, 4: 0.02, 6: 0.01})
    (row,) = overfit_claims(finetunes)
    decided, _ = decide([row])
    assert row["ours"] == pytest.approx(0.5) and row["hypothesis"] is None
    assert decided[0]["status"] == NOT_TESTED and math.isnan(decided[0]["p_holm"])


def test_untrained_controls_are_never_scored_and_appear_once(tmp_path, runs_csv):
    """The untrained models of owt and wt103 runs of one config and seed are the same model: one control row per
    matrix, status 'control (no verdict)', however strong its trend."""
    trained = [
        write_spectra(tmp_path, f"owt-small-diffeq-s{seed}", family="diffeq", dataset="owt", growth=3.0, seed=seed)
        for seed in range(3)
    ]
    untrained = [
        write_spectra(
            tmp_path,
            f"{dataset}-small-diffeq-s{seed}",
            family="diffeq",
            dataset=dataset,
            growth=3.0,
            seed=seed,
            folder="spectra_untrained",
        )
        for dataset in ("owt", "wt103")
        for seed in range(3)
    ]
    card = scorecard(ScorecardInputs(preset="mini", runs_csv=runs_csv, spectra=trained, untrained_spectra=untrained))
    controls = card[card["item"].str.startswith("(4) control")]
    assert len(controls) == 2 and set(controls["status"]) == {CONTROL} and controls["p_holm"].isna().all()
    assert controls["evidence"].str.contains("3 distinct models").all()
    trend = by_item(card).loc["(4) QK spectrum grows with t, DiffEqFormer on owt"]
    assert trend["ours"] > 0.5 and trend["status"] == NOT_TESTED


def test_clustering_claim_is_the_paired_gap_with_its_sign_test_beside_its_control(tmp_path):
    """The claim regime (200 seeds): t⁴ ends with more clusters than the constant in 190, fewer in 6, ties 4; the
    sign test decides it (supported) with a Clopper–Pearson interval on the fraction; the equal-mean control and a
    sensitivity regime are reported without verdict."""
    rows = []
    for regime, role, seeds, more in (
        ("notebook", "claim", 200, 190),
        ("equal-mean", "control", 200, 10),
        ("T10-unnormalised", "sensitivity", 20, 0),
    ):
        for seed in range(seeds):
            constant = 3
            quartic = 12 if seed < more else (3 if seed < more + 4 else 2)
            rows += [
                {
                    "regime": regime,
                    "role": role,
                    "horizon": 20.0,
                    "dt": 0.1,
                    "seed": seed,
                    "magnitude": m,
                    "degree": d,
                    "tokens": 32,
                    "n_clusters": n,
                    "mean_pairwise_distance": 1.0,
                }
                for m, d, n in (("constant", 0, constant), ("quartic", 4, quartic))
            ]
    path = tmp_path / "sweep.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    decided, family = decide(clustering_claims(path))
    card = by_item(pd.DataFrame(decided))
    claim = card.loc["(6) t⁴ ends with more clusters than the constant a(t): notebook (claim)"]
    assert claim["status"] == SUPPORTED and claim["ours"] == pytest.approx(0.95)
    assert 0.9 < claim["low"] < 0.95 < claim["high"] < 0.98 and claim["p"] < 1e-40
    assert "sign test 190 vs 6 (ties 4)" in claim["evidence"] and "constant clusters in 100%" in claim["evidence"]
    assert card.loc["(6) t⁴ ends with more clusters than the constant a(t): equal-mean (control)", "status"] == CONTROL
    assert (
        card.loc["(6) t⁴ ends with more clusters than the constant a(t): T10-unnormalised (sensitivity)", "status"]
        == SENSITIVITY
    )
    assert "1 rows" in family
