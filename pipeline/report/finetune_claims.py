"""Claims (2) and (3) on the fine-tunes of Fig. 5 (docs/paper.md#claims): per seed, the fine-tuned DiffEqFormer
against GPT's fine-tune of the same method, and the over-fitting of the full fine-tunes against N′."""

from pathlib import Path

import numpy as np
import pandas as pd

from pipeline.config.families import DIFFEQ_FAMILIES
from pipeline.report.claim_rows import by_seed, claim
from pipeline.report.intervals import correlation_interval, fisher_z, paired_differences, t_interval
from pipeline.report.tidy_inputs import FINETUNE_KEYS, eval_curve, read_record

PLATEAU_EVALUATIONS, PLATEAU_NATS = 3, 0.02
"""A fine-tune's curve has plateaued when its last 3 evaluations lower the best validation loss before them by
less than 0.02 nats in total (docs/experiments.md, "The mini study")."""


def plateaued(losses: np.ndarray) -> bool:
    """``PLATEAU_EVALUATIONS`` / ``PLATEAU_NATS`` on a curve's ``losses``: best loss before the last k evaluations −
    best loss overall."""
    if len(losses) <= PLATEAU_EVALUATIONS:
        return False
    return float(losses[:-PLATEAU_EVALUATIONS].min() - losses.min()) < PLATEAU_NATS


def load_finetunes(paths: list[Path]) -> pd.DataFrame:
    """One row per fine-tune summary, with its over-fitting (final − best validation loss over its curve) and
    whether its curve plateaued."""
    rows = []
    for path in paths:
        summary = read_record(path, FINETUNE_KEYS, "a fine-tune summary written by the finetune stage")
        losses = eval_curve(path)["eval_loss"]
        rows.append(
            {**summary, "overfit": summary["val_loss"] - losses.min(), "plateaued": plateaued(losses.to_numpy())}
        )
    return pd.DataFrame(rows, columns=[*FINETUNE_KEYS, "overfit", "plateaued"])


def finetune_claims(finetunes: pd.DataFrame) -> list[dict]:
    """(2) fine-tunes of the DiffEqFormer resampled to N′ beat the GPT baseline's fine-tune of the same method:
    Δ val_loss < 0 per seed; primary for LoRA at N′ = L/2 and N′ = L, scored only when every curve plateaued (else
    it stays in the family with p = 1)."""
    rows = []
    for (source, target, method), runs in finetunes.groupby(["source_dataset", "target_dataset", "method"]):
        diffeq = runs["family"].isin(DIFFEQ_FAMILIES)
        baseline = runs[~diffeq]
        for num_steps, ours in runs[diffeq].groupby("num_steps"):
            depth = {ours["source_steps"].iloc[0] / 2: "L/2", ours["source_steps"].iloc[0]: "L"}.get(num_steps)
            flat = int(ours["plateaued"].sum() + baseline["plateaued"].sum())
            total = len(ours) + len(baseline)
            evidence = (
                f"mean ppl {ours['val_ppl'].mean():.2f} vs GPT {baseline['val_ppl'].mean():.2f}; "
                f"{flat} of {total} curves plateaued"
            )
            primary = method == "lora" and depth is not None
            rows.append(
                claim(
                    f"(2) {method} DiffEqFormer N′={num_steps} beats GPT, {source}→{target}",
                    "Fig. 5",
                    t_interval(paired_differences(by_seed(ours, "val_loss"), by_seed(baseline, "val_loss"))),
                    "Δ log-ppl (DiffEqFormer − GPT, paired by seed)",
                    evidence,
                    hypothesis=f"(2) {method} N′={depth}, {source}→{target}" if primary else None,
                    claimed="below",
                    scored=flat == total,
                )
            )
    return rows


def overfit_claims(finetunes: pd.DataFrame) -> list[dict]:
    """(3) fewer steps over-fit less: per seed, Spearman ρ(N′, final − best validation loss) of the full
    DiffEqFormer fine-tunes into WikiText-103. Over a few N′ ρ takes a few values (±0.5, ±1 for three): no verdict."""
    full = finetunes[
        (finetunes["method"] == "full")
        & finetunes["family"].isin(DIFFEQ_FAMILIES)
        & (finetunes["target_dataset"] == "wt103")
    ]
    rows = []
    for source, runs in full.groupby("source_dataset"):
        rhos = [
            float(seed_runs["num_steps"].corr(seed_runs["overfit"], method="spearman"))
            for _, seed_runs in runs.groupby("seed")
        ]
        rows.append(
            claim(
                f"(3) fewer steps over-fit less on WikiText-103 (full, from {source})",
                "Fig. 5",
                correlation_interval(fisher_z(rhos, runs["num_steps"].nunique()).tolist()),
                "Spearman ρ(N′, final − best val_loss) per seed",
                f"ρ over {runs['num_steps'].nunique()} N′ values takes a few values only; largest "
                f"over-fit {runs['overfit'].max():.3g} nats",
            )
        )
    return rows
