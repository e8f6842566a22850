"""The paper preset's dry run at a site whose GPU partition allows 4 hours: every training run longer than that is a
planned chain of jobs whose attempts cover its estimate, and no job that cannot resume is clipped."""

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from pipeline.config import load_preset, pretrain_runs
from pipeline.config.site import load_site
from pipeline.planning.grid import Grid
from pipeline.planning.jobs import CHAIN_MARGIN_RETRIES, STARTUP_MIN, JobSizing

ROOT = Path(__file__).resolve().parents[2]


def write_site(path: Path, **changes) -> Path:
    raw = yaml.safe_load((ROOT / "profiles" / "slurm" / "site.example.yaml").read_text())
    raw["site"].update(changes)
    path.write_text(yaml.safe_dump(raw))
    return path


def dry_run(workdir: Path, site: Path, *targets: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            *targets,
            "-n",
            "--snakefile",
            str(ROOT / "workflow" / "Snakefile"),
            "--directory",
            str(workdir),
            "--profile",
            "profiles/slurm",
            "--config",
            f"site={site}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=300,
    )


def job_resources(output: str) -> list[tuple[str, dict[str, str], dict[str, str]]]:
    """(rule, wildcards, resources) of each job block of a dry run."""
    jobs = []
    for line in output.splitlines():
        if match := re.match(r"^(?:local)?rule (\w+):$", line):
            jobs.append((match[1], {}, {}))
        elif jobs and (match := re.match(r"^    (wildcards|resources): (.*)$", line)):
            jobs[-1][1 if match[1] == "wildcards" else 2].update(item.split("=", 1) for item in match[2].split(", "))
    return jobs


def test_at_a_4_hour_site_long_runs_are_chains_whose_attempts_cover_them_and_nothing_is_clipped(
    tmp_path, paper_fit_table
):
    site = write_site(tmp_path / "site.yaml", max_runtime_min=240, target_runtime_min=240, cpu_max_runtime_min=1440)
    paper_fit_table(tmp_path, {}, site)
    result = dry_run(tmp_path, site, "all")
    assert result.returncode == 0, result.stderr[-2000:]
    config = load_preset({"preset": "paper"})
    sizing = JobSizing(Grid.load(config), load_site(site))
    jobs = job_resources(result.stdout)
    trains = 240 - STARTUP_MIN - 600 / 60
    pretrain = {wildcards["run"]: resources for rule, wildcards, resources in jobs if rule == "pretrain"}
    for run_id in ("owt-llama1b-llama", "owt-llama1b-diffeq_llama"):
        needed, granted, chunks = (int(pretrain[run_id][key]) for key in ("needed_min", "runtime", "chunks"))
        assert granted == 240 and needed > 4 * 240 and chunks >= 5, pretrain[run_id]
        assert chunks * trains >= needed - STARTUP_MIN > (chunks - 1) * trains
    retries = sizing.chain_retries(pretrain_runs(config))
    assert retries == max(int(resources["chunks"]) for resources in pretrain.values()) - 1 + CHAIN_MARGIN_RETRIES
    for rule, wildcards, resources in jobs:
        if "slurm_partition" in resources and rule not in ("pretrain", "finetune"):
            assert int(resources["runtime"]) == int(resources["needed_min"]), (rule, wildcards, resources)
    assert {rule: resources["runtime"] for rule, _, resources in jobs if rule == "token_cache"} == {
        "token_cache": "720"
    }


def test_at_a_site_whose_cpu_partition_allows_10_hours_the_token_cache_is_refused_not_clipped(
    tmp_path, paper_fit_table
):
    site = write_site(tmp_path / "site.yaml", max_runtime_min=240, target_runtime_min=240, cpu_max_runtime_min=600)
    paper_fit_table(tmp_path, {}, site)
    result = dry_run(tmp_path, site, "results/paper/data/caches/owt-gpt2")
    assert result.returncode != 0
    assert (
        "token_cache job needs an estimated 720 min but partition 'cpu' allows 600 min and the job cannot "
        "resume; set cpu_partition in the site file"
    ) in result.stdout + result.stderr
