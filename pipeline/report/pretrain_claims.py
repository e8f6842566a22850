"""Claims (1), (5) and (7) on the pretraining runs (docs/paper.md#claims): per table group, one statistic per seed
paired across families (both runs of a seed share its data order), tested by ``pipeline.report.intervals``."""

import pandas as pd

from pipeline.config.families import FAMILY_LABELS, SHARED_FAMILIES
from pipeline.report.claim_rows import by_seed, claim
from pipeline.report.intervals import non_inferiority, paired_differences, t_interval
from pipeline.report.power import NON_INFERIORITY_MARGIN

TRAIN_COST_GOAL = 1.15
"""Paper App. D.1: DiffEqFormer trains at most ~1.15× slower than GPT, i.e. throughput ratio ≥ 1/1.15."""
FAMILY_PAIRS = (("gpt", "diffeq"), ("llama", "diffeq_llama"))


def perplexity_claims(runs: pd.DataFrame) -> list[dict]:
    """(1) "comparable to or better than" (abstract) and "outperforming" (Sec. 5): per table group, Δ val_loss
    (challenger − baseline) per seed, tested for non-inferiority (Δ < +``NON_INFERIORITY_MARGIN``, one-sided, its
    one-sided 95 % upper bound) and for superiority (Δ < 0, two-sided)."""
    rows = []
    for group, runs_of_group in runs[runs["role"] == "table"].groupby("group", sort=False):
        families = {
            family: by_seed(rows_of_family, "val_loss") for family, rows_of_family in runs_of_group.groupby("family")
        }
        for baseline, challenger in FAMILY_PAIRS:
            if not {baseline, challenger} <= set(families):
                continue
            differences = paired_differences(families[challenger], families[baseline])
            better = t_interval(differences)
            names = f"{FAMILY_LABELS[challenger]} − {FAMILY_LABELS[baseline]}"
            ppl = runs_of_group.groupby("family")["val_ppl"].mean()
            evidence = f"mean ppl {ppl[challenger]:.2f} vs {ppl[baseline]:.2f}"
            primary = baseline == "gpt"
            rows.append(
                claim(
                    f"(1) {FAMILY_LABELS[challenger]} better than {FAMILY_LABELS[baseline]}, {group}",
                    "Tables 1-2",
                    better,
                    f"Δ log-ppl ({names}, paired by seed)",
                    evidence,
                    hypothesis=f"(1) better, {group}" if primary else None,
                    claimed="below",
                )
            )
            rows.append(
                claim(
                    f"(1) {FAMILY_LABELS[challenger]} comparable to or better than {FAMILY_LABELS[baseline]} "
                    f"(non-inferior at +{NON_INFERIORITY_MARGIN:g} nats), {group}",
                    "abstract, Tables 1-2",
                    non_inferiority(differences, NON_INFERIORITY_MARGIN),
                    f"Δ log-ppl ({names}, paired by seed); interval: one-sided 95 % upper bound",
                    evidence,
                    hypothesis=f"(1) non-inferior, {group}" if primary else None,
                    claimed="non-inferior",
                    threshold=NON_INFERIORITY_MARGIN,
                )
            )
    return rows


def sharing_claims(runs: pd.DataFrame) -> list[dict]:
    """(5) weight sharing is worse: per seed, the shared model's val_loss − the best other model's, > 0."""
    rows = []
    for group, runs_of_group in runs[runs["role"] == "table"].groupby("group", sort=False):
        wide = runs_of_group.pivot(index="seed", columns="family", values="val_loss")
        others = wide[[family for family in wide.columns if family not in SHARED_FAMILIES]].min(axis=1)
        for family in [family for family in wide.columns if family in SHARED_FAMILIES]:
            ppl = runs_of_group.loc[runs_of_group["family"] == family, "val_ppl"].mean()
            rows.append(
                claim(
                    f"(5) weight sharing is worse: {FAMILY_LABELS[family]}, {group}",
                    "Table 1",
                    t_interval((wide[family] - others).tolist()),
                    "Δ log-ppl (shared − best other, paired by seed)",
                    f"mean ppl {ppl:.2f}",
                    hypothesis=f"(5) weight sharing is worse, {group}",
                    claimed="above",
                )
            )
    return rows


def throughput_claims(runs: pd.DataFrame) -> list[dict]:
    """(7) training throughput only slightly below GPT's: per seed DiffEqFormer / GPT tokens/s, ≥ 1/1.15. CPU jobs
    on a shared host: reported, no verdict."""
    rows = []
    for group, runs_of_group in runs[runs["role"] == "table"].groupby("group", sort=False):
        families = {
            family: by_seed(rows_of_family, "mean_tokens_per_s")
            for family, rows_of_family in runs_of_group.groupby("family")
        }
        if {"gpt", "diffeq"} <= set(families):
            diffeq, gpt = families["diffeq"], families["gpt"]
            ratios = [diffeq[seed] / gpt[seed] for seed in sorted(set(diffeq) & set(gpt))]
            rows.append(
                claim(
                    f"(7) throughput only slightly below GPT, {group}",
                    "Fig. 15",
                    t_interval(ratios, 1 / TRAIN_COST_GOAL),
                    "throughput ratio DiffEqFormer / GPT",
                    "tokens/s after the compiling first step on a shared CPU host: no verdict",
                    threshold=1 / TRAIN_COST_GOAL,
                )
            )
    return rows
