"""Data jobs' minutes from the measured rates and the corpora's sizes; a site's timed slice (pipeline.data.rates)."""

import itertools
import json

import pytest
import yaml

from pipeline.cli import main
from pipeline.data.corpora import tiny_corpus_file, tiny_corpus_splits
from pipeline.data.files import iter_texts
from pipeline.data.rates import RATES, data_job_minutes, measured_minutes


def test_a_faster_recorded_rate_gives_fewer_minutes_and_only_the_cache_scales_with_cpus(tmp_path):
    table = yaml.safe_load(RATES.read_text())
    table["rates"]["token_cache"]["per_cpu_s"] *= 2
    table["rates"]["fit"]["per_cpu_s"] *= 2
    faster = tmp_path / "rates.yaml"
    faster.write_text(yaml.safe_dump(table))
    measured = data_job_minutes("token_cache", "owt", 32)
    assert data_job_minutes("token_cache", "owt", 32, faster) == pytest.approx(measured / 2)
    assert data_job_minutes("token_cache", "owt", 16) == pytest.approx(2 * measured)
    assert measured_minutes("fit", 59, 8, faster) == pytest.approx(measured_minutes("fit", 59, 1) / 2), "one process"
    assert (
        data_job_minutes("corpus", "owt", 8)
        == data_job_minutes("corpus", "owt", 1)
        > data_job_minutes("corpus", "wt103", 1)
    )
    with pytest.raises(ValueError, match="no rate of data job 'tokenizer' or no size of corpus 'owt'"):
        data_job_minutes("tokenizer", "owt", 1)


def test_levanters_ray_builder_adds_its_seconds_per_split_and_shard_so_small_shards_make_a_cache_slower():
    serial = data_job_minutes("token_cache", "fortunes", 2)
    ray = data_job_minutes("token_cache", "fortunes", 2, builder="ray")
    assert ray - serial == pytest.approx((2 * 13.3 + 2 * 0.08) / 60)  # 2 splits, at most 2 shards of 100000 documents
    assert data_job_minutes(
        "token_cache", "fortunes", 2, builder="ray", source={"docs_per_shard": 20}
    ) == pytest.approx(serial + (2 * 13.3 + (716 + 1) * 0.08) / 60)


def test_a_sites_timed_slice_exports_each_splits_first_rows_and_tokenizes_them_leaving_only_its_rates(
    tmp_path, tokenizer_dir
):
    out, rows = tmp_path / "pydocs.json", 40
    source = json.dumps({"kind": "tiny", "corpus": "pydocs", "test_split": True})
    main(["data-rate", "--source", source, "--documents", str(rows), "--out", str(out), str(tokenizer_dir)])
    measured = json.loads(out.read_text())
    texts = [
        text
        for split in tiny_corpus_splits("pydocs")
        for text in itertools.islice(iter_texts([tiny_corpus_file("pydocs", split)]), rows)
        if text.strip()
    ]
    assert (measured["documents"], measured["characters"]) == (len(texts), sum(map(len, texts)))
    assert measured["rates"]["corpus"]["per_cpu_s"] > 0 and measured["rates"]["token_cache"]["per_cpu_s"] > 0
    assert [path.name for path in tmp_path.iterdir()] == [out.name], "the slice's export and cache are removed"
