"""One row of the scorecard: a number or a claim of the paper beside ours, its status and evidence."""

from __future__ import annotations

import math

from pipeline.report.fidelity import linked_rows

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


def row(
    section: str,
    item: str,
    source: str,
    *,
    paper: float = math.nan,
    ours: float = math.nan,
    low: float = math.nan,
    high: float = math.nan,
    p: float = math.nan,
    deviation: float = math.nan,
    unit: str = "",
    status: str,
    evidence: str = "",
) -> dict:
    return dict(
        section=section,
        item=item,
        source=source,
        paper=paper,
        ours=ours,
        low=low,
        high=high,
        p=p,
        p_holm=math.nan,
        deviation=deviation,
        unit=unit,
        status=status,
        evidence=evidence,
        ledger=linked_rows(source),
    )
