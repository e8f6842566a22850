"""With `ray.address` set, training runs as a task on an existing Ray cluster (a `ray start --head` here)."""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e
RAY = str(Path(sys.executable).parent / "ray")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def ray_head():
    """A Ray head on loopback; its temp dir is short because Ray's Unix sockets live there (107-byte limit)."""
    port = free_port()
    temp_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    env = {**os.environ, "RAY_TMPDIR": temp_dir, "RAY_AUTH_MODE": "disabled"}
    started = subprocess.run([RAY, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
                              "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats"],
                             capture_output=True, text=True, env=env, timeout=120)
    assert started.returncode == 0, started.stdout[-2000:] + started.stderr[-2000:]
    yield f"127.0.0.1:{port}"
    subprocess.run([RAY, "stop", "--force"], capture_output=True, env=env, timeout=120)
    shutil.rmtree(temp_dir, ignore_errors=True)


def test_pretrain_is_placed_on_the_external_cluster(tiny_data_workdir, ray_head):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "RAY_AUTH_MODE": "disabled"}
    target = "results/tiny/runs/wt103-small-gpt/summary.json"
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(ROOT / "workflow" / "Snakefile"), "--directory",
         str(tiny_data_workdir), "--profile", str(ROOT / "profiles" / "ci"), target,
         "--config", f"ray={{address: '{ray_head}'}}", "pretrain={wt103-small: {train: {steps: 6, eval_every: 3}}}"],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    log = (tiny_data_workdir / "results/tiny/logs/pretrain/wt103-small-gpt.log").read_text()
    assert f"Submitting pretrain to Ray ({ray_head})" in log
    provenance = json.loads((tiny_data_workdir / "results/tiny/runs/wt103-small-gpt/provenance.json").read_text())
    assert provenance["ray"]["gcs_address"].endswith(ray_head.split(":")[1])
    assert json.loads((tiny_data_workdir / target).read_text())["steps"] == 6
