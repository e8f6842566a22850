import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
# XLA compiles the tests' own JAX programs with LLVM -O1, as the tiny preset's jobs (`xla_flags`): a compile option,
# not arithmetic. tests/models: 236 -> 190 CPU-s, the paper-shape smoke 220 -> 208 (2026-11-24, 2 cores).
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=1")

import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RAY = str(Path(sys.executable).parent / "ray")


LONGEST_FIRST = ("tests/e2e/test_tiny_dag.py", "tests/cluster/test_slurm.py")
"""The longest test modules (the tiny DAG ~30 min, the SLURM cluster ~9 min on 2 cores), collected first: with
``-n 2 --dist loadfile`` each starts on its own worker at once and the rest runs beside them."""


def pytest_collection_modifyitems(config, items):
    rank = {module: index for index, module in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


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
    processes here do not share a token. Its processes run in their own process group, which the teardown kills:
    ``ray stop`` would also stop the Ray clusters of other test workers running in parallel."""
    port = free_port()
    temp_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    env = {**os.environ, "RAY_TMPDIR": temp_dir, "RAY_AUTH_MODE": "disabled"}
    started = subprocess.Popen([RAY, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
                                "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                               start_new_session=True)
    stdout, stderr = started.communicate(timeout=120)
    assert started.returncode == 0, stdout[-2000:] + stderr[-2000:]
    yield f"127.0.0.1:{port}"
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(started.pid, sig)
        except ProcessLookupError:
            break
        time.sleep(3)
    shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture
def paper_fit_table():
    """A function writing ``results/paper/fit.csv`` into a working directory: a fitting row for every training job
    of the paper preset at the GPUs the example site gives it, at micro-batch ``micro_batches[run]`` or else the
    whole per-GPU batch (a SLURM-profile DAG of the paper preset needs the table: ``pipeline/site.py``)."""
    from pipeline.config import finetune_runs, load_preset, pretrain_runs
    from pipeline.site import JobResources, load_site

    def write(workdir: Path, micro_batches: dict[str, int]) -> Path:
        config, site = load_preset({"preset": "paper"}), load_site(ROOT / "profiles" / "slurm" / "site.example.yaml")
        jobs = JobResources(config, site)
        lines = ["run_id,role,gpus,device_bytes,batch_size,micro_batch,fits"]
        for stage, runs in (("pretrain", pretrain_runs(config)), ("finetune", finetune_runs(config))):
            for run_id, spec in runs.items():
                gpus = jobs.training_gpu_count(stage, run_id)
                micro_batch = micro_batches.get(run_id, spec.train.batch_size // gpus)
                lines.append(f"{run_id},{stage},{gpus},{site.gpu_memory_bytes},{spec.train.batch_size},{micro_batch},"
                             "True")
        table = workdir / "results" / "paper" / "fit.csv"
        table.parent.mkdir(parents=True, exist_ok=True)
        table.write_text("\n".join(lines) + "\n")
        return table

    return write
