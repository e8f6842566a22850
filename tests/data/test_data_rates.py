"""Data jobs' minutes from the measured rates and the corpora's sizes (pipeline.data.rates)."""

import pytest
import yaml

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
