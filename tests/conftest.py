import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
# XLA compiles the tests' own JAX programs with LLVM -O1, as the tiny preset's jobs (`xla_flags`): a compile option,
# not arithmetic. tests/models: 236 -> 190 CPU-s, the paper-shape smoke 220 -> 208 (2026-11-24, 2 cores).
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=1")
# Ray starts its workers 15 niceness levels down, and the tests' jobs train in Ray workers: so they yielded the CPUs
# to every test process and to any niced load beside CI (results/benchmarks/ci-time-2026-11-29.md).
os.environ.setdefault("RAY_worker_niceness", "0")

import contextlib
import json
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from cli_testkit import ROOT, snakemake_run

from pipeline.execution.job_env import NO_TORCH_ENV
from pipeline.execution.local_ray import LOCAL_RAY_SYSTEM_CONFIG

pytest_plugins = ("tiers",)

RAY = str(Path(sys.executable).parent / "ray")
TORCH_SWITCH_AT_START = {name: os.environ.get(name) for name in NO_TORCH_ENV}


LONGEST_FIRST = (
    "tests/e2e/test_tiny_dag.py",
    "tests/cluster/test_slurm.py",
    "tests/train/test_run_integrity.py",
    "tests/bench/test_paper_shapes.py",
    "tests/test_warm_workers.py",
    "tests/test_preflight.py",
    "tests/train/test_resume.py",
    "tests/models/test_discretize.py",
    "tests/planning/test_fit.py",
    "tests/test_driver_stop.py",
    "tests/data/test_data_cache.py",
)
"""The longest test modules, longest first (worker time in CI from a fresh clone of a953c91 with three workers,
2026-11-27: the tiny DAG ~19 min; the SLURM cluster ~15; run integrity ~10; the paper-shape smoke ~7; the warm
workers ~4; the preflight and resume ~3; the rest under 2), then the others. ``-n 3 --dist loadfile`` hands
modules to the workers in this order: the three longest take a worker each, the long modules follow, and the short
ones come last, so the workers finish close together."""


READ_THE_TINY_DAG = ("tests/evaluate/test_run_interfaces.py", "tests/train/test_finetune_sources.py")
"""Modules other than the tiny DAG's own that read the runs it trained (``tiny_dag``): they come after every other
module, so that the worker taking them finds the DAG built (by the worker that took the DAG's module first) instead
of waiting for it."""


def pytest_collection_modifyitems(items):
    """Orders the modules longest first (``LONGEST_FIRST``), then the others, then those that read the tiny DAG."""
    rank = {module: index for index, module in enumerate(LONGEST_FIRST)}
    rank.update({module: len(LONGEST_FIRST) + 1 for module in READ_THE_TINY_DAG})
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(LONGEST_FIRST)))


@pytest.fixture(scope="session")
def tiny_data_workdir(tmp_path_factory, worker_id):
    """A Snakemake working directory where the real rules have built the tiny preset's WikiText-stand-in data
    (corpus, BPE tokenizer, Levanter cache). Built once per test session (``built_once``) in the folder the
    pytest-xdist workers share; every worker gets its own copy (outputs and Snakemake's records of them, mtimes
    kept), so that what its tests write there (Snakemake runs, bad runs) stays its own."""

    def build(built: Path) -> dict:
        result = snakemake_run(built, "--profile", str(ROOT / "profiles" / "ci"), "results/tiny/data/caches/wt103-bpe")
        return {"returncode": result.returncode, "output": result.stderr[-3000:]}

    built = shared_folder(tmp_path_factory, worker_id) / "tiny-data-built"
    built_once(built, build)
    workdir = tmp_path_factory.getbasetemp() / "tiny-data"
    shutil.copytree(built, workdir, symlinks=True, ignore=shutil.ignore_patterns("locks"))
    return workdir


@pytest.fixture(scope="session")
def tiny_data(tiny_data_workdir) -> Path:
    """``results/tiny/data`` of ``tiny_data_workdir``: the tiny corpus, BPE tokenizer and token cache."""
    return tiny_data_workdir / "results" / "tiny" / "data"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def started_ray_head():
    """An external Ray cluster (``ray start --head`` on loopback, 4 CPUs as the pipeline's own Ray of a 2-core DAG run
    has, its settings: ``pipeline.execution.local_ray``) and its address, stopped on leaving. Its temp dir is short
    because Ray's Unix sockets live there (107-byte limit); token auth is off because separately started Ray
    processes here do not share a token. Its processes run in their own process group, which the exit kills:
    ``ray stop`` would also stop the Ray clusters of other test workers running in parallel."""
    port = free_port()
    temp_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    env = {**os.environ, "RAY_TMPDIR": temp_dir, "RAY_AUTH_MODE": "disabled"}
    started = subprocess.Popen(
        [
            RAY,
            "start",
            "--head",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            "--num-cpus=4",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--system-config={json.dumps(LOCAL_RAY_SYSTEM_CONFIG)}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    stdout, stderr = started.communicate(timeout=120)
    assert started.returncode == 0, stdout[-2000:] + stderr[-2000:]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(started.pid, sig)
            except ProcessLookupError:
                break
            time.sleep(3)
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def ray_head():
    """``started_ray_head()`` for one test module: stopped when the module ends, not left idle."""
    with started_ray_head() as address:
        yield address


def shared_folder(tmp_path_factory, worker_id: str) -> Path:
    """The temporary folder every pytest-xdist worker of this test session shares (each worker's own is below it);
    without xdist, the session's own."""
    return tmp_path_factory.getbasetemp() if worker_id == "master" else tmp_path_factory.getbasetemp().parent


def built_once(folder: Path, build) -> dict:
    """The record of ``build(folder)`` (a dict with ``returncode`` and ``output``), kept in ``<folder>.json``. Under
    pytest-xdist every worker has its own session, so the first worker to ask builds, under a file lock that the
    others wait on (pytest-xdist's recipe for a session fixture built once), and records the outcome: a failed build
    fails the others at once instead of being built again."""
    from filelock import FileLock

    record = folder.with_name(f"{folder.name}.json")
    with FileLock(folder.with_name(f"{folder.name}.lock")):
        if not record.exists():
            record.write_text(json.dumps(build(folder)))
    outcome = json.loads(record.read_text())
    assert outcome["returncode"] == 0, outcome["output"]
    return outcome


@pytest.fixture(scope="session")
def tiny_dag(request, tmp_path_factory, worker_id) -> Path:
    """``results/tiny`` of the whole tiny DAG and its report, built once per test session (``built_once``) in the
    folder the pytest-xdist workers share. Its working directory starts from the builder's ``tiny_data_workdir``, and
    its jobs run on a Ray head started for the build."""
    from e2e.dag_snakemake import build_tiny_dag

    def build(workdir: Path) -> dict:
        with started_ray_head() as ray_address:
            built = build_tiny_dag(workdir, request.getfixturevalue("tiny_data_workdir"), ray_address)
        output = built.stdout[-4000:] + built.stderr[-4000:]
        return {"returncode": built.returncode, "output": output, "ray": ray_address}

    workdir = shared_folder(tmp_path_factory, worker_id) / "tiny-dag"
    built_once(workdir, build)
    return workdir / "results" / "tiny"


@pytest.fixture(autouse=True)
def torch_switch_left_as_it_was():
    """A verb but lm-eval's called in process (``pipeline.cli.main``, a module fixture's too) switches torch off for
    its whole process (``job_env.export_torch_switch``); each test ends with the switch the session started with."""
    yield
    for name, value in TORCH_SWITCH_AT_START.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def tiny_dag_ray_address(tiny_dag, tmp_path_factory, worker_id) -> str:
    """The address of the Ray cluster the tiny DAG's jobs ran on (stopped after the build)."""
    return json.loads((shared_folder(tmp_path_factory, worker_id) / "tiny-dag.json").read_text())["ray"]


@pytest.fixture(scope="session")
def tiny_dag_run(tiny_dag, tmp_path_factory):
    """A function copying the tiny DAG's run folder ``run_id`` into a new temporary folder: a test that needs a
    trained run reads the copy, so nothing it runs changes what the other tests read. The DAG's own module reruns
    owt-small-gpt, owt-gpt24-gpt and the two GPT fine-tunes from OpenWebText: read other runs."""

    def copy(run_id: str) -> Path:
        return Path(shutil.copytree(tiny_dag / "runs" / run_id, tmp_path_factory.mktemp("dag-runs") / run_id))

    return copy


@pytest.fixture
def planned_fit_row():
    """A function giving a fit table row (``pipeline.planning.measured.FitRow.planned``) for ``run_id`` of ``config``
    on ``gpus`` GPUs at ``micro_batch``; byte columns 0, or a total over the GPU's memory where it ``fits`` not.
    ``fits_at_paper_batch``: at the whole per-GPU batch unless given."""
    import dataclasses

    from pipeline.planning.grid import Grid
    from pipeline.planning.measured import FitRow

    def row(config, run_id, gpus, micro_batch, *, device_bytes=80 * 10**9, fits=True, fits_at_paper_batch=None):
        workload = Grid.load(config).workloads[run_id]
        plan = dict.fromkeys(("parameters", "trainable_parameters", "param_bytes", "replicated_param_bytes"), 0)
        plan |= {"optimizer_bytes": 0, "temp_bytes": 0, "total_bytes": 0 if fits else device_bytes}
        planned = FitRow.planned(workload, gpus, device_bytes, micro_batch, plan)
        at_batch = planned.fits_at_paper_batch if fits_at_paper_batch is None else fits_at_paper_batch
        return dataclasses.replace(planned, fits_at_paper_batch=at_batch)

    return row


@pytest.fixture
def site_fit_table(planned_fit_row):
    """A function writing ``results/<preset>/fit.csv`` into a working directory: a fitting row for every training job
    and memory probe of the preset (the paper's unless given) at the GPUs the example site gives it, at micro-batch
    ``micro_batches[run]`` or else the whole per-GPU batch (a SLURM-profile DAG at a site with GPUs needs the table:
    ``pipeline/planning/jobs.py``); at the GPUs ``site_file`` gives it where one is given. Beside it a preflight
    report that measured nothing (its header) and each corpus's data rates as the project measured them: a GPU job's
    resources read both tables, a data job's its corpus's rates, so every job is sized. ``markdown``: also
    ``fit.md``, the fit checkpoint's other output, so the preflight's jobs are planned from the table."""
    from pipeline.config import load_preset
    from pipeline.config.site import load_site
    from pipeline.data.rates import RATES, SITE_RATES, rate_table
    from pipeline.planning.fit import fit_table
    from pipeline.planning.grid import Grid
    from pipeline.planning.jobs import JobSizing
    from pipeline.preflight.report import COLUMNS as PREFLIGHT_COLUMNS

    def write(
        workdir: Path, micro_batches: dict, site_file: Path | None = None, preset="paper", markdown=False
    ) -> Path:
        config = load_preset({"preset": preset})
        site = load_site(site_file or ROOT / "profiles" / "slurm" / "site.example.yaml")
        grid = Grid.load(config)
        jobs = JobSizing(grid, site)
        rows = []
        for run_id, job in {**grid.training, **grid.probes}.items():
            gpus = jobs.gpu_count(run_id)
            micro_batch = micro_batches.get(run_id, job.train.batch_size // gpus)
            rows.append(planned_fit_row(config, run_id, gpus, micro_batch, device_bytes=site.gpu_memory_bytes))
        table = workdir / "results" / config["preset"] / "fit.csv"
        table.parent.mkdir(parents=True, exist_ok=True)
        table_markdown, table_csv = fit_table(rows)
        table.write_text(table_csv)
        if markdown:
            table.with_suffix(".md").write_text(table_markdown)
        table.with_name("preflight.csv").write_text(",".join(PREFLIGHT_COLUMNS) + "\n")
        rates = json.dumps({"rates": rate_table(RATES)["rates"]})
        (table.parent / SITE_RATES).mkdir(exist_ok=True)
        for dataset in config["datasets"]:
            (table.parent / SITE_RATES / f"{dataset}.json").write_text(rates)
        return table

    return write
