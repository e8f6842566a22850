"""One row of the scorecard: a number or a claim of the paper beside ours, its status and evidence; a claim's row
from its per-seed statistic's ``Interval`` (``claim``)."""

import math

import pandas as pd

from pipeline.report.fidelity import linked_rows
from pipeline.report.intervals import NOT_TESTED, SINGLE_RUN, Interval

SCORECARD_COLUMNS = [
    "section",
    "item",
    "source",
    "paper",
    "ours",
    "low",
    "high",
    "p",
    "p_holm",
    "deviation",
    "unit",
    "status",
    "evidence",
    "ledger",
]
"""``low``/``high``: the 95 % interval of ``ours`` across seeds (empty for n = 1). ``p``: the claim's test;
``p_holm``: its Holm-adjusted p within the family of primary claims (empty outside it). ``ledger``: the
fidelity-ledger rows (``pipeline/report/reference/fidelity.csv``) whose choice can move the item."""


NUMBERS = ("paper", "ours", "low", "high", "p", "deviation")
"""The numeric columns a row may be given; those not given, and ``p_holm`` (set by the scorecard), are NaN."""


def row(
    section: str, item: str, source: str, *, status: str, unit: str = "", evidence: str = "", **numbers: float
) -> dict:
    unknown = sorted(set(numbers) - set(NUMBERS))
    if unknown:
        raise TypeError(f"row: unknown columns {unknown}; expected some of {', '.join(NUMBERS)}.")
    return {
        "section": section,
        "item": item,
        "source": source,
        **dict.fromkeys((*NUMBERS, "p_holm"), math.nan),
        **numbers,
        "unit": unit,
        "status": status,
        "evidence": evidence,
        "ledger": linked_rows(source),
    }


def claim(
    item: str,
    source: str,
    interval: Interval,
    unit: str,
    evidence: str,
    *,
    hypothesis: str | None = None,
    claimed: str = "",
    threshold: float = 0.0,
    status: str = NOT_TESTED,
    scored: bool = True,
) -> dict:
    """A claim's row: the statistic's mean, interval and p; ``hypothesis`` names a primary claim (decided by the
    scorecard, ``claimed`` "above", "below" or "non-inferior" of ``threshold``), else ``status`` stands. A primary
    row that cannot be ``scored`` (a fine-tune whose curves did not plateau) counts with p = 1."""
    spread = "" if interval.n > 1 else f"; {SINGLE_RUN}"
    spread += "" if scored else "; not scored (curves did not plateau): p = 1 in Holm's family"
    return {
        **row(
            "claim",
            item,
            source,
            ours=interval.mean,
            low=interval.low,
            high=interval.high,
            p=interval.p,
            deviation=interval.mean - threshold,
            unit=unit,
            status=status,
            evidence=f"{evidence}; n={interval.n}{spread}",
        ),
        "hypothesis": hypothesis,
        "claimed": claimed,
        "threshold": threshold,
        "n": interval.n,
        "scored": scored,
    }


def by_seed(frame: pd.DataFrame, column: str) -> dict[int, float]:
    """``column`` of each seed's row (a run without a seed is seed 0)."""
    return dict(zip(frame["seed"].fillna(0).astype(int), frame[column].astype(float), strict=True))
