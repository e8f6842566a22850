"""How long a data job takes at paper scale, from the project's measured throughput (``data_rates.yaml``; the record:
``results/benchmarks/data-rates-2026-11-29.md``) and the paper corpora's documented sizes (docs/paper.md#corpus-sizes).

    minutes = size / (rate per CPU-second × CPUs) / 60

where size and rate are in the job's unit (the corpus export: characters; the token cache: tokens) and CPUs is the
job's CPUs where it runs in parallel (the token cache: Levanter's builder tokenizes shard groups at once), else 1
(the export is one process).
"""

from __future__ import annotations

import functools
from pathlib import Path

import yaml

RATES = Path(__file__).resolve().parent / "data_rates.yaml"


def data_job_minutes(kind: str, corpus: str, cpus: int, rates: Path = RATES) -> float:
    """Minutes of the data job ``kind`` (``corpus`` or ``token_cache``) on the paper corpus ``corpus`` (``wt103``,
    ``owt``) with ``cpus`` CPUs, by the formula above; ``rates``: the table of measured rates and corpus sizes."""
    table = rate_table(Path(rates))
    if kind not in table["rates"] or corpus not in table["corpora"]:
        raise ValueError(
            f"{rates}: no rate of data job {kind!r} or no size of corpus {corpus!r}; expected a job among "
            f"{sorted(table['rates'])} and a corpus among {sorted(table['corpora'])}."
        )
    rate = table["rates"][kind]
    used = cpus if rate["parallel"] else 1
    return table["corpora"][corpus][rate["unit"]] / (rate["per_cpu_s"] * used) / 60


@functools.cache
def rate_table(rates: Path) -> dict:
    """The table of measured rates and corpus sizes at ``rates``, read once per process (a Snakemake parse sizes every
    data job from it)."""
    return yaml.safe_load(rates.read_text())
