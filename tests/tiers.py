"""The fast tier and the slow one (docs/testing.md#two-tiers): a test is ``slow`` when it, its fixtures or the
processes it starts start a Ray or run Snakemake jobs; ``pytest -m "not slow"`` runs the others, in process but for
dry runs and tools. A test gets ``slow`` here by rule (its markers, its fixtures) or from its module; an unmarked test
that starts a Ray anywhere below it, or a Snakemake that runs jobs, fails and names the mark, so a new slow test
cannot join the fast tier unnoticed."""

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

SLOW_MARKERS = ("e2e", "paper_shape", "alone")
"""The tiny DAG and what reads it, the SLURM cluster, the kill/resume tests, the paper-shape smoke."""
SLOW_FIXTURES = ("tiny_data_workdir", "ray_head", "tiny_dag")
"""Fixtures that run Snakemake jobs (the tiny data) or start a Ray: a test using one, itself or through another
fixture, is slow."""
PLANS_ONLY = {"-n", "--dry-run", "--dryrun", "--lint"}
"""Snakemake options under which it reads the workflow and runs no job."""
FAST_RAY_TMPDIR = Path(tempfile.mkdtemp(prefix="ray-fast-", dir="/tmp"))
"""``RAY_TMPDIR`` of a fast test and of every process below it: a Ray started there leaves its folder here."""
MARK_IT = "mark it `pytest.mark.slow` (docs/testing.md#two-tiers)"


class SlowTestUnmarked(Exception):
    """A test outside the ``slow`` tier started a Ray or ran Snakemake jobs."""


def runs_snakemake_jobs(command) -> bool:
    """Whether a command line (a ``subprocess.Popen`` argument) is Snakemake running jobs, not only planning them."""
    argv = command.split() if isinstance(command, str | bytes) else [os.fsdecode(part) for part in command]
    snakemake = Path(argv[0]).name == "snakemake" or argv[1:3] == ["-m", "snakemake"]
    return snakemake and not PLANS_ONLY & set(argv)


class FastTest:
    running = False


SAVED_RAY_TMPDIR = pytest.StashKey[str | None]()
"""A fast test's stash: ``RAY_TMPDIR`` before its set-up, restored after its teardown."""


def refuse_snakemake_jobs(event: str, args: tuple) -> None:
    if event == "subprocess.Popen" and FastTest.running and runs_snakemake_jobs(args[1]):
        raise SlowTestUnmarked(f"this test runs Snakemake jobs ({' '.join(map(str, args[1]))[:200]}): {MARK_IT}")


sys.addaudithook(refuse_snakemake_jobs)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    for item in items:
        if any(item.get_closest_marker(name) for name in SLOW_MARKERS) or set(SLOW_FIXTURES) & set(item.fixturenames):
            item.add_marker("slow")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    if not item.get_closest_marker("slow"):
        FastTest.running = True
        item.stash[SAVED_RAY_TMPDIR] = os.environ.get("RAY_TMPDIR")
        os.environ["RAY_TMPDIR"] = str(FAST_RAY_TMPDIR)
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item):
    result = yield
    if SAVED_RAY_TMPDIR in item.stash:
        FastTest.running = False
        saved = item.stash[SAVED_RAY_TMPDIR]
        if saved is None:
            del os.environ["RAY_TMPDIR"]
        else:
            os.environ["RAY_TMPDIR"] = saved
        started = sorted(FAST_RAY_TMPDIR.iterdir())
        for path in started:
            shutil.rmtree(path, ignore_errors=True)
        if started:
            raise SlowTestUnmarked(f"this test started a Ray (it left {started[0].name!r} in RAY_TMPDIR): {MARK_IT}")
    return result


def pytest_unconfigure():
    shutil.rmtree(FAST_RAY_TMPDIR, ignore_errors=True)
