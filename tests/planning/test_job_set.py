"""The jobs a dry run plans and what each asks for: the paper preset at the example site whose GPU and CPU partitions
allow 4 hours, record by record against ``paper_4h_site_jobs.json`` (a change to the job sizing, the placement or the
rules' wiring shows here as the records that differ), and the chains its long runs become."""

import json
from pathlib import Path

from cli_testkit import dry_run, dry_run_jobs, example_site

from pipeline.config import load_preset
from pipeline.config.site import load_site
from pipeline.planning.grid import Grid
from pipeline.planning.jobs import JobSizing
from pipeline.preflight.report import COLUMNS

EXPECTED = Path(__file__).with_name("paper_4h_site_jobs.json")
"""The expected records; after a deliberate change, rewrite it from ``planned_jobs`` and review its diff."""
HOST_RESOURCES = ("tmpdir", "disk", "disk_mb", "disk_mib")
"""Resources Snakemake fills in from the machine it runs on, left out of a record."""


def planned_jobs(workdir: Path, site: Path) -> list[dict]:
    """(rule, wildcards, resources) of each job of the paper preset's dry run at ``site``, sorted."""
    result = dry_run(workdir, "all", "--profile", "profiles/slurm", "--config", f"site={site}")
    assert result.returncode == 0, result.stderr[-2000:]
    return [
        {
            "rule": job["rule"],
            "wildcards": job.get("wildcards", ""),
            "resources": {name: value for name, value in job["resources"].items() if name not in HOST_RESOURCES},
        }
        for job in dry_run_jobs(result.stdout, workdir)
    ]


def test_at_a_4_hour_site_the_dry_run_plans_the_expected_jobs_and_long_runs_are_chains(tmp_path, site_fit_table):
    site = example_site(tmp_path / "site.yaml", max_runtime_min=240, target_runtime_min=240, cpu_max_runtime_min=240)
    site_fit_table(tmp_path, {}, site)
    jobs = planned_jobs(tmp_path, site)
    expected = json.loads(EXPECTED.read_text())
    differing = [job for job in jobs if job not in expected] + [job for job in expected if job not in jobs]
    assert len(jobs) == len(expected) and not differing, differing[:4]
    pretrain = {job["wildcards"]: job["resources"] for job in jobs if job["rule"] == "pretrain"}
    for run_id in ("owt-llama1b-llama", "owt-llama1b-diffeq_llama"):  # each chain's arithmetic: test_jobs.py
        needed, granted, chunks = (int(pretrain[f"run={run_id}"][key]) for key in ("needed_min", "runtime", "chunks"))
        assert granted == 240 and needed > 4 * 240 and chunks >= 5, run_id


def test_at_a_fresh_site_the_dry_run_plans_fit_and_preflight_before_the_grid_whose_gpu_jobs_are_not_sized_yet(tmp_path):
    """No fit table, no preflight report, no data rates: one call plans, measures, then sizes each GPU job when its
    tables are written and each hub corpus's data jobs when its slice is timed (``<TBD>`` until then); the fit is sized
    already, by its rows at the measured rate."""
    site = example_site(tmp_path / "site.yaml", max_runtime_min=240, target_runtime_min=240, cpu_max_runtime_min=240)
    result = dry_run(tmp_path, "all", "--profile", "profiles/slurm", "--config", f"site={site}")
    assert result.returncode == 0 and "checkpoint fit:" in result.stdout, result.stderr[-2000:]
    jobs = dry_run_jobs(result.stdout, tmp_path)
    rules = {job["rule"] for job in jobs}
    assert {"preflight", "data_rate", "corpus", "pretrain", "finetune", "memory_probe"} <= rules, rules
    for job in jobs:
        sized = job["resources"].get("runtime") != "<TBD>"
        assert sized == (job["rule"] not in ("pretrain", "finetune", "memory_probe", "corpus", "token_cache")), job
    [fit] = [job["resources"] for job in jobs if job["rule"] == "fit"]
    planned = JobSizing(Grid.load(load_preset({"preset": "paper"})), load_site(site)).cpu("fit")
    assert (fit["runtime"], fit["needed_min"]) == (str(planned.minutes), str(planned.needed_minutes)), fit


def test_a_red_preflight_row_stops_the_grid_before_its_first_job_naming_the_row(tmp_path, site_fit_table):
    site = example_site(tmp_path / "site.yaml")
    site_fit_table(tmp_path, {}, site)
    row = {column: "" for column in COLUMNS} | {"shape": "gpt-small-g1-mb64", "kind": "pretrain", "verdict": "failed"}
    row |= {"run_id": "owt-small-gpt", "device_label": "h100", "error": "the job ran out of accelerator memory"}
    report = tmp_path / "results" / "paper" / "preflight.csv"
    report.write_text(",".join(COLUMNS) + "\n" + ",".join(row[column] for column in COLUMNS) + "\n")
    result = dry_run(tmp_path, "all", "--profile", "profiles/slurm", "--config", f"site={site}")
    assert result.returncode != 0
    assert (
        "results/paper/preflight.csv: the preflight of shape gpt-small-g1-mb64 (run owt-small-gpt) failed (the job "
        "ran out of accelerator memory); fix that, delete results/paper/preflight/gpt-small-g1-mb64/row.json and "
        "results/paper/preflight.csv, and run the command again: it reruns that job before the grid."
    ) in " ".join((result.stdout + result.stderr).split())
