"""Every failure class ends a verb's output with one sentence naming what it concerns; the traceback stays above it.

Provoked for real on CPU: host out-of-memory (an address-space limit), device out-of-memory (XLA asked for 400 GB),
a full disk (a 64 KiB tmpfs in a private mount namespace), a Ray worker killed by SIGKILL, an unexpected bug.
"""

import os
import resource
import shutil
import subprocess
import sys
import textwrap
import time

import pytest
from cli_testkit import ROOT

from pipeline.cli import main
from pipeline.execution.errors import failure_sentence

CLUSTERING = (
    '{{"tokens": {tokens}, "hidden_dim": 3, "x0_range": 2.0, "magnitudes": ["constant"], "seed": 0, '
    '"seeds": 1, "regimes": {{"authors": {{"role": "claim", "horizon": {horizon}, "dt": 0.1, "scale": 0.5, '
    '"magnitude": "notebook"}}, "equal-mean": {{"role": "control", "horizon": {horizon}, "dt": 0.1, '
    '"scale": 0.5, "magnitude": "equal_mean"}}}}}}'
)
SPECTRA = ["spectra", "--run-dir", "runs/x", "--tokenizer", "tok", "--time-oversampling", "1", "--out", "x.csv"]
SPECTRA += ["--untrained-out", "u.csv"]
"""A ``spectra`` job's arguments but where it runs."""


def pipeline_command(*args: str, preexec_fn=None, wrapper: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "JAX_PLATFORMS": "cpu"}
    return subprocess.run(
        [*wrapper, sys.executable, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        preexec_fn=preexec_fn,
        timeout=180,
    )


def last_line(result: subprocess.CompletedProcess) -> str:
    return (result.stdout + result.stderr).strip().splitlines()[-1]


def one_gib_of_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def test_host_out_of_memory_ends_with_one_sentence(tmp_path):
    out = tmp_path / "clustering"
    settings = CLUSTERING.format(tokens=40000, horizon=0.1)
    clustering = ["clustering", "--settings", settings, "--out-dir", str(out)]
    result = pipeline_command("-m", "pipeline", *clustering, preexec_fn=one_gib_of_address_space)
    assert result.returncode == 1
    assert "MemoryError" in result.stderr  # the traceback stays in the log
    assert last_line(result).startswith(f"error: `clustering` for {out} ran out of host memory")
    assert not out.exists()


def test_full_disk_ends_with_one_sentence(tmp_path):
    """A 64 KiB tmpfs mounted in a private user and mount namespace: no root needed, nothing left on the host."""
    unshare = ("unshare", "--user", "--map-root-user", "--mount")
    if shutil.which("unshare") is None or subprocess.run([*unshare, "true"], capture_output=True).returncode != 0:
        pytest.skip("unprivileged user namespaces are not available here")
    disk = tmp_path / "disk"
    disk.mkdir()
    script = textwrap.dedent(f"""
        import subprocess, sys
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", {str(disk)!r}], check=True)
        from pipeline.cli import main
        sys.exit(main(["clustering", "--settings", {CLUSTERING.format(tokens=40, horizon=20)!r},
                       "--out-dir", {str(disk / "out")!r}]))
    """)
    result = pipeline_command("-c", script, wrapper=unshare)
    assert result.returncode == 1
    assert "No space left on device" in result.stderr
    assert last_line(result).startswith(f"error: the disk is full: `clustering` for {disk / 'out'} could not write")
    assert not any(disk.iterdir())  # the mount was private: the host's folder is untouched


@pytest.mark.slow
def test_ray_worker_killed_by_a_signal_ends_with_one_sentence(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        import pipeline.execution.runner
        from pipeline.cli import main

        submit = pipeline.execution.runner.run_on_ray
        # the worker dies
        pipeline.execution.runner.run_on_ray = lambda target, *args, **kwargs: submit("os:abort", **kwargs)
        sys.exit(main({[*SPECTRA, "--ray-num-cpus", "1"]!r}))
    """)
    result = pipeline_command("-c", script)
    assert result.returncode == 1
    assert "WorkerCrashedError" in result.stderr
    assert last_line(result).startswith("error: the Ray worker running `spectra` for runs/x died (WorkerCrashedError")


def closed_local_port() -> int:
    import socket

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        return closed.getsockname()[1]


def test_a_ray_address_where_nothing_answers_ends_with_one_sentence_in_seconds():
    """``ray.init`` retries a dead ``host:port`` for minutes (measured: over 10 with ``127.0.0.1:1``); the job
    checks the address first and names it, where it came from and what to do."""
    port = closed_local_port()
    started = time.monotonic()
    spectra = ["-m", "pipeline", *SPECTRA, "--ray-address"]
    result = pipeline_command(*spectra, f"127.0.0.1:{port}")
    assert result.returncode == 1 and time.monotonic() - started < 60
    assert last_line(result) == (
        f"error: no Ray cluster answers at 127.0.0.1:{port} (--ray-address or $PIPELINE_RAY_ADDRESS: the preset's "
        "ray.address, or in a local run the Ray that Snakemake started for its jobs): Connection refused; start that "
        "cluster (profiles/slurm/ray-cluster.sbatch) or fix ray.address (null: an embedded Ray in each job), or rerun "
        "the local snakemake whose Ray ended."
    )
    result = pipeline_command(*spectra, "head-node")
    assert last_line(result).startswith("error: Ray address 'head-node' (--ray-address or $PIPELINE_RAY_ADDRESS")


def test_the_token_cache_builder_checks_its_ray_address_too(monkeypatch):
    """The ``cache`` verb hands its address to Levanter's Ray cache builder through ``RAY_ADDRESS``."""
    import ray

    from pipeline.data.cache import _ray_cache_options
    from pipeline.execution.runner import RayAddressError

    assert not ray.is_initialized()
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{closed_local_port()}")
    with pytest.raises(RayAddressError, match="no Ray cluster answers at 127.0.0.1:"):
        _ray_cache_options()


def test_device_out_of_memory_is_one_sentence():
    import jax.numpy as jnp

    with pytest.raises(RuntimeError, match="RESOURCE_EXHAUSTED") as error:
        jnp.ones((10**11,)).block_until_ready()
    sentence, with_traceback = failure_sentence(error.value, "`pretrain` for results/tiny/runs/x")
    assert sentence.startswith("error: `pretrain` for results/tiny/runs/x ran out of accelerator memory")
    assert with_traceback and "\n" not in sentence


def test_an_unexpected_error_is_one_sentence_after_its_traceback(tmp_path, capsys):
    assert main(["clustering", "--settings", '{"tokens": 4}', "--out-dir", str(tmp_path)]) == 1
    stderr = capsys.readouterr().err
    assert "Traceback (most recent call last)" in stderr
    expected = f"error: `clustering` for {tmp_path} failed unexpectedly (KeyError: 'hidden_dim'); the traceback above"
    assert stderr.strip().splitlines()[-1].startswith(expected)
