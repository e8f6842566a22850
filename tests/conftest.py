import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RAY = str(Path(sys.executable).parent / "ray")


@pytest.fixture(scope="session")
def tiny_data_workdir(tmp_path_factory):
    """A Snakemake working directory where the real rules have built the tiny preset's WikiText-stand-in data
    (corpus, BPE tokenizer, Levanter cache)."""
    workdir = tmp_path_factory.mktemp("tiny-data")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "workflow" / "Snakefile"),
                             "--directory", str(workdir), "--profile", str(ROOT / "profiles" / "ci"),
                             "results/tiny/data/caches/wt103-bpe"], cwd=ROOT, capture_output=True, text=True,
                            env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return workdir


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def ray_head():
    """An external Ray cluster (``ray start --head`` on loopback, 2 CPUs) and its address. Its temp dir is short
    because Ray's Unix sockets live there (107-byte limit); token auth is off because separately started Ray
    processes here do not share a token."""
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
