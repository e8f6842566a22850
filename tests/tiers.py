"""The fast tier and the slow one (docs/testing.md#two-tiers): a test is ``slow`` when it, its fixtures or the processes
it starts start a Ray or run Snakemake jobs; ``pytest -m "not slow"`` runs the others. ``slow`` comes by rule (a
test's markers and fixtures, below) or by hand; an unmarked test that starts a Ray anywhere below it, or a Snakemake
that runs jobs, fails naming the mark, so a new slow test cannot join the fast tier unnoticed."""

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

SLOW_MARKERS = ("e2e", "paper_shape")
SLOW_FIXTURES = ("tiny_data_workdir", "ray_head", "tiny_dag")
"""They build the tiny data with Snakemake or start a Ray: a test using one, itself or through a fixture, is slow."""
PLANS_ONLY = {"-n", "--dry-run", "--dryrun", "--lint"}
FAST_RAY_TMPDIR = Path(tempfile.mkdtemp(prefix="ray-fast-", dir="/tmp"))
"""A fast test's ``RAY_TMPDIR``, its subprocesses' too: a Ray started below it leaves its folder here."""
SAVED_RAY_TMPDIR = pytest.StashKey[str | None]()
MARK_IT = "mark it `pytest.mark.slow` (docs/testing.md#two-tiers)"


class SlowTestUnmarked(Exception):
    """A test outside the ``slow`` tier started a Ray or ran Snakemake jobs."""


class FastTest:
    """``running``: a test outside the ``slow`` tier is being set up, run or torn down."""

    running = False


def runs_snakemake_jobs(command) -> bool:
    """Whether a ``subprocess.Popen`` command line is Snakemake running jobs, not only planning them."""
    argv = command.split() if isinstance(command, str | bytes) else [os.fsdecode(part) for part in command]
    return (Path(argv[0]).name == "snakemake" or argv[1:3] == ["-m", "snakemake"]) and not PLANS_ONLY & set(argv)


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
        if item.stash[SAVED_RAY_TMPDIR] is None:
            del os.environ["RAY_TMPDIR"]
        else:
            os.environ["RAY_TMPDIR"] = item.stash[SAVED_RAY_TMPDIR]
        started = sorted(FAST_RAY_TMPDIR.iterdir())
        for path in started:
            shutil.rmtree(path, ignore_errors=True)
        if started:
            raise SlowTestUnmarked(f"this test started a Ray (it left {started[0].name!r} in RAY_TMPDIR): {MARK_IT}")
    return result


def pytest_unconfigure():
    shutil.rmtree(FAST_RAY_TMPDIR, ignore_errors=True)
