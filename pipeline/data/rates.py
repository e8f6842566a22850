"""How long a data job takes at paper scale, from the project's measured throughput (``data_rates.yaml``; the record:
``results/benchmarks/data-rates-2026-11-29.md``) and the paper corpora's documented sizes (docs/paper.md#corpus-sizes).

    minutes = (size / (rate per CPU-second × CPUs) + splits × per_split_s + shards × per_shard_s) / 60

where size and rate are in the job's unit (the corpus export: characters; the token cache: tokens), CPUs is the
job's CPUs where it runs in parallel (the token cache: Levanter's builder tokenizes shard groups at once), else 1
(the export is one process), and a builder's own seconds per split and per shard (Levanter's Ray builder) are added
where the table has them: small shards (a preset's ``docs_per_shard``) make a cache slower.
"""

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
    """Minutes of the data job ``kind`` (``corpus`` or ``token_cache``) on the corpus ``corpus`` (a paper corpus,
    ``wt103`` or ``owt``, or a shipped tiny one) with ``cpus`` CPUs, exported as its preset's ``source`` says (its
    splits, ``docs_per_shard``) and, for a token cache, built by ``builder``, by the formula above; ``rates``: the
    table of measured rates and corpus sizes."""
    table = rate_table(Path(rates))
    if kind not in table["rates"] or corpus not in table["corpora"]:
        raise ValueError(
            f"{rates}: no rate of data job {kind!r} or no size of corpus {corpus!r}; expected a job among "
            f"{sorted(table['rates'])} and a corpus among {sorted(table['corpora'])}."
        )
    rate, size = table["rates"][kind], table["corpora"][corpus]
    seconds = size[rate["unit"]] / (rate["per_cpu_s"] * (cpus if rate["parallel"] else 1))
    own = rate.get(f"{builder}_builder", {"per_split_s": 0, "per_shard_s": 0})
    source = source or {}
    splits = 3 if source.get("test_split") else 2
    shards = math.ceil(size["documents"] / source.get("docs_per_shard", DOCS_PER_SHARD)) + splits - 1  # at most
    return (seconds + splits * own["per_split_s"] + shards * own["per_shard_s"]) / 60


@functools.cache
def rate_table(rates: Path) -> dict:
    """The table of measured rates and corpus sizes at ``rates``, read once per process (a Snakemake parse sizes every
    data job from it)."""
    return yaml.safe_load(rates.read_text())
