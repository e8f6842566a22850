"""The tiny preset through `profiles/slurm` on a real single-node SLURM cluster on localhost: every job is
submitted with sbatch by snakemake-executor-plugin-slurm. Only what a laptop lacks is overridden: the
partition, GPUs, CPUs/memory per job, and the status command (no accounting database here)."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e
LAPTOP_RESOURCES = ["slurm_partition={partition}", "gpu=0", "cpus_per_task=1", "mem_mb=3000", "runtime=60"]
BIG_RULES = ("corpus", "tokenizer", "token_cache", "pretrain", "perplexity_table")


@pytest.fixture(scope="module")
def slurm_partition():
    if os.geteuid() != 0:
        pytest.skip("starting slurmctld/slurmd and munged needs root")
    started = subprocess.run(["bash", str(ROOT / "tests" / "cluster" / "start_slurm.sh")], capture_output=True,
                             text=True, timeout=600)
    assert started.returncode == 0, started.stderr
    return started.stdout.split()[-1]


def test_tiny_preset_runs_through_sbatch(tmp_path, slurm_partition):
    resources = [r.format(partition=slurm_partition) for r in LAPTOP_RESOURCES]
    set_resources = [f"{rule}:{r}" for rule in BIG_RULES for r in resources if not r.startswith("slurm_partition")]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    target = "results/tiny/runs/wt103-small-diffeq/summary.json"
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(ROOT / "workflow" / "Snakefile"), "--directory", str(tmp_path),
         "--profile", "slurm", "--config", "preset=tiny", "--slurm-status-command", "squeue",
         "--default-resources", *resources, "--set-resources", *set_resources,
         "--slurm-logdir", str(tmp_path / "slurm-logs"), target, "results/tiny/runs/wt103-small-gpt/summary.json"],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=1800)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    submitted = set(re.findall(r"has been submitted with SLURM jobid (\d+)", output))
    assert len(submitted) == 6, output[-4000:]  # 2 corpora, tokenizer, cache, 2 pretrain runs
    summary = json.loads((tmp_path / target).read_text())
    assert summary["family"] == "diffeq" and summary["steps"] == 40
    assert json.loads((tmp_path / target.replace("summary", "provenance")).read_text())["slurm_job_id"]


def test_ray_cluster_sbatch_starts_a_cluster_in_the_allocation(tmp_path, slurm_partition):
    address_file = tmp_path / "ray-address"
    env = {**os.environ, "RAY_ADDRESS_FILE": str(address_file), "RAY_PORT": "6391", "RAY_AUTH_MODE": "disabled",
           "RAY": str(Path(sys.executable).parent / "ray")}
    submitted = subprocess.run(["sbatch", "--parsable", "--nodes=1", f"--partition={slurm_partition}",
                                "--exclusive=user", "--output", str(tmp_path / "ray-%j.out"),
                                str(ROOT / "profiles" / "slurm" / "ray-cluster.sbatch")],
                               cwd=ROOT, capture_output=True, text=True, env=env, timeout=60, check=True)
    job_id = submitted.stdout.strip().split(";")[0]
    try:
        deadline = time.time() + 180
        while not address_file.exists() and time.time() < deadline:
            time.sleep(1)
        address = address_file.read_text().strip()
        status = subprocess.run([env["RAY"], "status", f"--address={address}"], capture_output=True, text=True,
                                timeout=60, env=env)
        active = status.stdout.split("Active:")[1].split("Pending:")[0]
        assert active.count("node_") == 1, status.stdout
    finally:
        subprocess.run(["scancel", job_id], timeout=30)
