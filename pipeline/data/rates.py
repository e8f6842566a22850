"""How long a data job or the fit table takes at paper scale, from measured throughput (``data_rates.yaml``) and the
paper corpora's sizes (docs/paper.md#corpus-sizes; docs/runs.md#data-jobs-resume):

    minutes = (size / (rate per CPU-second × CPUs) + splits × per_split_s + shards × per_shard_s) / 60

size and rate in characters (corpus export, CPUs = 1), tokens (token cache, its CPUs) or rows (the fit table, CPUs =
1; no splits or shards)."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import yaml

from pipeline.data.shards import DOCS_PER_SHARD

RATES = Path(__file__).resolve().parent / "data_rates.yaml"


def data_job_minutes(
    kind: str, corpus: str, cpus: int, rates: Path = RATES, source: dict | None = None, builder: str | None = None
) -> float:
    """Minutes of data job ``kind`` (``corpus`` or ``token_cache``) on ``corpus`` with ``cpus`` CPUs, as its
    preset's ``source`` and ``builder`` say, by the formula above; ``rates``: the measured table."""
    table = rate_table(Path(rates))
    if kind not in table["rates"] or corpus not in table["corpora"]:
        raise ValueError(
            f"{rates}: no rate of data job {kind!r} or no size of corpus {corpus!r}; expected a job among "
            f"{sorted(table['rates'])} and a corpus among {sorted(table['corpora'])}."
        )
    rate, size = table["rates"][kind], table["corpora"][corpus]
    own = rate.get(f"{builder}_builder", {"per_split_s": 0, "per_shard_s": 0})
    source = source or {}
    splits = 3 if source.get("test_split") else 2
    shards = math.ceil(size["documents"] / source.get("docs_per_shard", DOCS_PER_SHARD)) + splits - 1  # at most
    own_s = splits * own["per_split_s"] + shards * own["per_shard_s"]
    return measured_minutes(kind, size[rate["unit"]], cpus, rates) + own_s / 60


def measured_minutes(kind: str, size: float, cpus: int, rates: Path = RATES) -> float:
    """Minutes of ``size`` of job ``kind``'s unit (characters, tokens, fit rows) on ``cpus`` CPUs at its measured rate
    per CPU-second (one CPU where the job is one process)."""
    rate = rate_table(Path(rates))["rates"][kind]
    return size / (rate["per_cpu_s"] * (cpus if rate["parallel"] else 1)) / 60


@functools.cache
def rate_table(rates: Path) -> dict:
    """The table of measured rates and corpus sizes at ``rates``, read once per process (a Snakemake parse sizes every
    data job from it)."""
    return yaml.safe_load(rates.read_text())
