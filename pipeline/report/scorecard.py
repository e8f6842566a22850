"""Scorecard: every number we produce beside the paper's (``paper_numbers``), and every claim of the paper
(docs/paper.md#claims, App. C.5/D) beside our evidence. Claims (1)-(7) are one statistic per seed each (paired
per-seed differences of validation cross-entropy, Δ log-perplexity) with its test (``intervals``); the primary
claims the design powers (``power``) form one Holm-adjusted family (docs/experiments.md#verdicts)."""

import functools
import html
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.config import load_preset
from pipeline.report.analysis_claims import clustering_claims, spectra_claims
from pipeline.report.claim_rows import SCORECARD_COLUMNS
from pipeline.report.finetune_claims import finetune_claims, load_finetunes, overfit_claims
from pipeline.report.intervals import (
    INCONCLUSIVE,
    INTERVAL_METHOD,
    SUPPORTED,
    VERDICT_RULE,
    holm,
    non_inferiority_verdict,
    verdict,
)
from pipeline.report.paper_numbers import COMPARABLE_PRESET, downstream_numbers, parameter_numbers, perplexity_numbers
from pipeline.report.power import Plan, planned_claims, powered_family
from pipeline.report.pretrain_claims import perplexity_claims, sharing_claims, throughput_claims
from pipeline.report.secondary_claims import ablation_claims, lambada_claims, memory_claims
from pipeline.report.table_views import TableFiles, write_views
from pipeline.report.tidy_inputs import RUN_COLUMNS, read_csv


@dataclass
class ScorecardInputs:
    """The tidy files the scorecard reads (any list may be empty when the preset does not produce it)."""

    preset: str
    """A built-in preset's name or a preset file, resolved with ``overrides`` (``--config``'s) as the DAG did."""
    runs_csv: Path
    finetune_summaries: list[Path] = field(default_factory=list)
    downstream: list[Path] = field(default_factory=list)
    spectra: list[Path] = field(default_factory=list)
    clustering_sweep: Path | None = None
    memory: list[Path] = field(default_factory=list)
    untrained_spectra: list[Path] = field(default_factory=list)
    overrides: dict[str, Any] = field(default_factory=dict)

    @functools.cached_property
    def config(self) -> dict[str, Any]:
        return load_preset({"preset": self.preset, **self.overrides})


def decide(claims: list[dict], plans: list[Plan]) -> tuple[list[dict], str]:
    """Holm over the family the design powers (``power.powered_family`` at the plans' ``design_seeds``), each member
    with the largest p of its rows (an unscorable or missing row: p = 1); each row gets the adjusted p and its
    verdict (a fraction below its minimum effect stays inconclusive). Other primary claims: not tested at this
    scale."""
    family, _ = powered_family(plans)
    minimum = {plan.hypothesis: plan.effect for plan in plans if plan.test == "sign"}
    members = sorted(family)
    rows = {member: [claim for claim in claims if claim.get("hypothesis") == member] for member in members}
    p_values = [
        max((row["p"] if row["scored"] and math.isfinite(row["p"]) else 1.0 for row in rows[member]), default=1.0)
        for member in members
    ]
    for member, adjusted in zip(members, holm(p_values), strict=True):
        for claim in rows[member]:
            claim["p_holm"] = adjusted
            if claim["claimed"] == "non-inferior":
                claim["status"] = non_inferiority_verdict(adjusted)
            else:
                claim["status"] = verdict(claim["ours"], adjusted, claim["threshold"], claim["claimed"])
            if claim["status"] == SUPPORTED and claim["ours"] < minimum.get(member, -math.inf):
                claim["status"] = INCONCLUSIVE
                claim["evidence"] += f"; below the minimum effect {minimum[member]:.0%} set before the run"
    for claim in claims:
        if claim.get("hypothesis") and claim["hypothesis"] not in family:
            claim["evidence"] += "; fewer seeds than 80 % power needs (pipeline/report/power.py)"
    names = "; ".join(members) or "none (no primary claim is powered at these seeds)"
    return claims, f"Holm family ({len(members)} hypotheses, fixed by the design, family-wise α = 0.05): {names}."


def scorecard(inputs: ScorecardInputs) -> pd.DataFrame:
    """Claims, then numbers: claims (1)-(7) (decided by ``decide``), the secondary claims, then the paper's numbers
    beside ours. ``card.attrs["family"]`` names the Holm family."""
    runs = read_csv(inputs.runs_csv, RUN_COLUMNS, "the pretrain run list")
    plans = planned_claims(inputs.config)
    finetunes = load_finetunes(inputs.finetune_summaries)
    claims, family = decide(
        perplexity_claims(runs)
        + finetune_claims(finetunes)
        + overfit_claims(finetunes)
        + spectra_claims(inputs.spectra, inputs.untrained_spectra)
        + sharing_claims(runs)
        + clustering_claims(inputs.clustering_sweep)
        + throughput_claims(runs),
        plans,
    )
    rows = (
        claims
        + lambada_claims(inputs.downstream)
        + ablation_claims(runs)
        + memory_claims(inputs.memory)
        + perplexity_numbers(runs)
        + parameter_numbers(inputs.config["preset"], runs)
        + downstream_numbers(inputs.config["preset"], inputs.downstream)
    )
    card = pd.DataFrame(rows, columns=SCORECARD_COLUMNS)
    card.attrs["family"] = family
    return card


def verdict_note(card: pd.DataFrame) -> str:
    """How the intervals, p-values and verdicts were computed, and the Holm family."""
    return f"Intervals (columns low, high): {INTERVAL_METHOD}. Verdict rule: {VERDICT_RULE} {card.attrs['family']}"


def scorecard_markdown(card: pd.DataFrame, preset: str) -> str:
    scope = (
        "the paper's configuration"
        if preset == COMPARABLE_PRESET
        else f"preset `{preset}`: small models on stand-in data; the paper's numbers are not comparable (status "
        "'not run at this preset')"
    )
    counts = card.groupby(["section", "status"]).size().unstack(fill_value=0)
    parts = [
        f"# Scorecard (preset `{preset}`)\n",
        f"Scope: {scope}.\n",
        f"## Status counts\n\n{counts.to_markdown()}\n",
        verdict_note(card) + "\n",
    ]
    for section, title in (("claim", "Claims"), ("number", "Numbers")):
        rows = card[card["section"] == section].drop(columns="section").astype(object)
        rows = rows.where(rows.notna(), None)
        parts.append(f"## {title}\n\n{rows.to_markdown(index=False, floatfmt='.4g', missingval='–')}\n")
    return "\n".join(parts)


def write_scorecard(inputs: ScorecardInputs, *, out: TableFiles) -> None:
    """``out.csv`` (tidy), ``out.md`` and ``out.html`` (the view the Snakemake report embeds)."""
    card = scorecard(inputs)
    table = card.to_html(index=False, na_rep="–", float_format="{:.4g}".format)
    body = f"<p>{html.escape(verdict_note(card))}</p>{table}"
    write_views(out, card, scorecard_markdown(card, inputs.config["preset"]), "td,th{padding:2px 8px}", body)
