"""The corpus export and the token cache sized from the measured rates (pipeline/data/data_rates.yaml) per dataset,
and planned as chains through the training runs' planner (pipeline.planning.placement.walltime) where the CPU
partition is shorter than their need."""

import dataclasses
import functools
import json
import math

import pytest
import yaml

from pipeline.config import load_preset
from pipeline.config.site import EXAMPLE, load_site
from pipeline.data.rates import RATES, data_job_minutes, measured_minutes
from pipeline.planning import jobs as job_sizing
from pipeline.planning.grid import Grid
from pipeline.planning.jobs import JobSizing
from pipeline.planning.placement import CHAIN_MARGIN_RETRIES, WalltimeError, chunk_count
from pipeline.planning.status import format_plan, plan_rows

FOUR_HOURS = dataclasses.replace(
    load_site(EXAMPLE), max_runtime_min=240, target_runtime_min=240, cpu_max_runtime_min=240
)


PAPER_GRID = Grid.load(load_preset({"preset": "paper"}))


def paper_sizing(site) -> JobSizing:
    return JobSizing(PAPER_GRID, site)


def needed(corpus_rate: str, corpus: str, cpus: int, site) -> int:
    """The planner's need of a paper data job (WikiText-103 with its test split; Levanter's Ray builder): measured
    minutes × safety factor + the site's start-up."""
    minutes = data_job_minutes(corpus_rate, corpus, cpus, source={"test_split": corpus == "wt103"}, builder="ray")
    return math.ceil(minutes * site.safety_factor + site.chunk_startup_min)


def test_at_the_4_hour_site_each_corpus_and_token_cache_is_sized_per_dataset_from_the_measured_rates():
    sizing = paper_sizing(FOUR_HOURS)
    for rule in ("corpus", "token_cache"):
        requests = sizing.data_jobs(rule)
        assert sorted(requests) == ["owt", "wt103"]
        cpus = requests["owt"].cpus
        for dataset, request in requests.items():
            assert request.needed_minutes == needed(rule, dataset, cpus, FOUR_HOURS)
            assert request.minutes == request.needed_minutes <= 240 and request.chunks == 1
        assert sizing.data_retries(rule) is None
    assert sizing.cpu("corpus", "owt").needed_minutes > sizing.cpu("corpus", "wt103").needed_minutes
    assert sizing.cpu("corpus", "owt").resources()["chunks"] == 1
    assert sizing.cpu("corpus", "owt").cpus == 1, "the export is one process"
    assert (sizing.cpu("fit").cpus, sizing.cpu("fit").mem_mb) == (1, 4000), "one planning process, 1.2 GB at its peak"


def test_a_data_job_longer_than_the_cpu_partition_is_a_planned_chain_and_the_plan_shows_it():
    site = dataclasses.replace(FOUR_HOURS, cpu_max_runtime_min=90)
    sizing = paper_sizing(site)
    corpus = sizing.cpu("corpus", "owt")
    need = needed("corpus", "owt", 1, site)
    assert need > 90 and corpus.minutes == 90 and corpus.needed_minutes == need
    assert corpus.chunks == chunk_count(need, 90, site.signal_lead_s, site.chunk_startup_min) == 3
    assert corpus.sbatch_flags == (f"--signal=URG@{site.signal_lead_s}",)
    assert sizing.data_retries("corpus") == 3 - 1 + CHAIN_MARGIN_RETRIES
    rows = {row["job"]: row for row in plan_rows(sizing)}
    assert rows["corpus owt"] | {"job": None} == {
        "job": None,
        "gpus": 0,
        "micro_batch": None,
        "needed_min": need,
        "granted_min": 90,
        "chunks": 3,
        "attempts": 3 + CHAIN_MARGIN_RETRIES,
        "partition": "cpu",
    }
    plan = format_plan(list(rows.values()))
    assert [line.split()[5:7] for line in plan.splitlines() if line.startswith("corpus owt")] == [["90", "3"]]
    fit_need = math.ceil(measured_minutes("fit", 59, 8) * site.safety_factor + site.chunk_startup_min)  # 59 rows
    assert rows["fit"]["chunks"] == chunk_count(fit_need, 90, site.signal_lead_s, site.chunk_startup_min) > 1
    assert "refused" not in plan, "the fit keeps its rows: a chain"
    with pytest.raises(WalltimeError, match="tokenizer job needs an estimated 60 min .* the job cannot resume"):
        paper_sizing(dataclasses.replace(site, cpu_max_runtime_min=50)).cpu("tokenizer")


def test_a_faster_recorded_or_site_measured_rate_gives_a_data_job_and_the_fit_fewer_minutes_through_the_planner(
    tmp_path, monkeypatch
):
    table = yaml.safe_load(RATES.read_text())
    table["rates"]["corpus"]["per_cpu_s"] *= 4
    table["rates"]["fit"]["per_cpu_s"] *= 4
    faster = tmp_path / "rates.yaml"
    faster.write_text(yaml.safe_dump(table))
    site = dataclasses.replace(FOUR_HOURS, cpu_max_runtime_min=90)
    sizing = paper_sizing(site)
    measured, measured_fit = sizing.cpu("corpus", "owt"), sizing.cpu("fit")
    (tmp_path / "owt.json").write_text(json.dumps({"rates": {"corpus": table["rates"]["corpus"]}}))
    at_site = JobSizing(PAPER_GRID, site, data_rates=tmp_path).cpu("corpus", "owt")  # the site's slice, 4x faster
    monkeypatch.setattr(job_sizing, "data_job_minutes", functools.partial(data_job_minutes, rates=faster))
    monkeypatch.setattr(job_sizing, "measured_minutes", functools.partial(measured_minutes, rates=faster))
    quicker, quicker_fit = sizing.cpu("corpus", "owt"), sizing.cpu("fit")
    assert quicker.needed_minutes < measured.needed_minutes and quicker.chunks < measured.chunks == 3
    assert at_site == quicker
    assert quicker_fit.needed_minutes < measured_fit.needed_minutes


def test_a_tiny_cache_of_small_shards_by_levanters_ray_builder_is_a_chain_at_a_1_minute_partition():
    """The tiny corpora are sized too; the Ray builder's seconds per shard make small shards a chain (the SLURM test
    builds this one), while the serial builder, which keeps no ledger within a split, is one job that cannot resume."""
    site = dataclasses.replace(
        FOUR_HOURS, gpus_per_node=0, cpu_max_runtime_min=1, chunk_startup_min=0.5, signal_lead_s=2
    )
    small_shards = {"datasets": {"owt": {"source": {"docs_per_shard": 20}}}}
    chained = JobSizing(Grid.load(load_preset({"preset": "tiny", "cache_builder": "ray", **small_shards})), site)
    assert chained.cpu("token_cache", "owt").chunks >= 2 and chained.data_retries("token_cache") >= 3
    serial = JobSizing(Grid.load(load_preset({"preset": "tiny", **small_shards})), site).cpu("token_cache", "owt")
    assert (serial.minutes, serial.chunks, serial.sbatch_flags) == (1, 1, ())
