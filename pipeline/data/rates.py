"""How long a data job or the fit table takes at paper scale, from measured throughput (``data_rates.yaml``) and the
paper corpora's sizes (docs/paper.md#corpus-sizes; docs/runs.md#data-jobs-resume):

    minutes = (size / (rate per CPU-second × CPUs) + splits × per_split_s + shards × per_shard_s) / 60

size and rate in characters (corpus export, CPUs = 1), tokens (token cache, its CPUs) or rows (the fit table, CPUs =
1; no splits or shards); at a site, the rates it measured on a slice of the corpus (``measure_slice``) win."""

import datetime
import functools
import json
import math
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml

from pipeline.data.shards import DOCS_PER_SHARD

RATES = Path(__file__).resolve().parent / "data_rates.yaml"
SITE_RATES = "data-rates"
"""The folder of a preset's results that holds the rates its site measured, one ``<dataset>.json`` per hub corpus."""
SLICE_DOCUMENTS = 20_000
"""Rows per split of a site's timed slice (``measure_slice``): some 100 MB of OpenWebText, 10 MB of WikiText-103."""


def data_job_minutes(
    kind: str,
    corpus: str,
    cpus: int,
    rates: Path = RATES,
    source: dict | None = None,
    builder: str | None = None,
    site_rates: dict | None = None,
) -> float:
    """Minutes of data job ``kind`` (``corpus`` or ``token_cache``) on ``corpus`` with ``cpus`` CPUs, as its
    preset's ``source`` and ``builder`` say, by the formula above; ``rates``: the measured table, ``site_rates``:
    ``measure_slice``'s ``rates`` on this corpus at the site, if measured."""
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
    return measured_minutes(kind, size[rate["unit"]], cpus, rates, site_rates) + own_s / 60


def measured_minutes(kind: str, size: float, cpus: int, rates: Path = RATES, site_rates: dict | None = None) -> float:
    """Minutes of ``size`` of job ``kind``'s unit (characters, tokens, fit rows) on ``cpus`` CPUs at its measured rate
    per CPU-second (one CPU where the job is one process): the site's, else the table's."""
    rate = {**rate_table(Path(rates))["rates"][kind], **(site_rates or {}).get(kind, {})}
    return size / (rate["per_cpu_s"] * (cpus if rate["parallel"] else 1)) / 60


def measure_slice(export: Callable[[Path], dict], tokenizers: Sequence[Path], work: Path) -> dict:
    """A corpus's data rates at this site from a slice of it, in ``work``: characters per CPU-second of ``export``
    (the corpus export of each split's first rows into the folder it is given; loading the dataset included, so a
    lower bound) and tokens per CPU-second of a token cache of that slice with each of ``tokenizers`` (the slowest),
    as ``data_rates.yaml``'s ``rates`` (CPU-seconds: this process's, all its threads)."""
    from pipeline.data.cache import build_token_cache
    from pipeline.data.corpora import corpus_split_files, corpus_splits

    corpus, started = work / "corpus", time.process_time()
    manifest = export(corpus)
    export_s = time.process_time() - started
    splits = corpus_splits(corpus)
    characters = sum(manifest[split]["characters"] for split in splits)
    rates = {"corpus": {"per_cpu_s": round(characters / export_s)}}
    files = [path for split in splits for path in corpus_split_files(corpus, split)]
    tokens_per_s = []
    for index, tokenizer in enumerate(tokenizers):
        started = time.process_time()
        tokens = build_token_cache(files, tokenizer, work / f"cache-{index}")["tokens"]
        tokens_per_s.append(tokens / (time.process_time() - started))
    if tokens_per_s:
        rates["token_cache"] = {"per_cpu_s": round(min(tokens_per_s))}
    documents = sum(manifest[split]["documents"] for split in splits)
    measured_on = f"{platform.node()}, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC"
    return {"rates": rates, "documents": documents, "characters": characters, "measured_on": measured_on}


def site_rates(folder: str | Path | None, dataset: str) -> dict:
    """The ``rates`` a site measured on a slice of ``dataset`` (``folder/<dataset>.json``, ``measure_slice``'s; {}
    before it ran or without a folder)."""
    path = Path(folder or "", f"{dataset}.json")
    return json.loads(path.read_text())["rates"] if folder and path.is_file() else {}


@functools.cache
def rate_table(rates: Path) -> dict:
    """The table of measured rates and corpus sizes at ``rates``, read once per process (a Snakemake parse sizes every
    data job from it)."""
    return yaml.safe_load(rates.read_text())
