"""The grid is enumerated once per Snakemake parse and once per ``cost``, ``fit`` and ``preflight`` call, and every job
the workflow schedules is one of its jobs."""

import collections
import json
import re

import pytest
from cli_testkit import ROOT, python_run

from pipeline.cli import main
from pipeline.config import load_preset
from pipeline.planning import fit
from pipeline.planning.grid import Grid
from pipeline.planning.preflight_jobs import stage_jobs, training_shapes
from pipeline.preflight.stages import STAGE_WORK

ONCE = {"Grid.load": 1, "pretrain_runs": 2, "finetune_runs": 1, "memory_probes": 1}
"""One grid per call: ``Grid.load`` once, which enumerates each kind of spec once; ``pretrain_runs`` once more by
``load_preset``, whose cross-reference check reads the run ids (``pipeline.config.loading``)."""
COUNTING = r"""
import collections, sys

import pipeline.config.grid as spec_grid
from pipeline.planning.grid import Grid

counts = collections.Counter()


def counting(name, function):
    def counted(*args, **kwargs):
        counts[name] += 1
        return function(*args, **kwargs)

    return counted


for name in ("pretrain_runs", "finetune_runs", "memory_probes"):
    original = getattr(spec_grid, name)
    for module in [m for key, m in list(sys.modules.items()) if key.startswith("pipeline")]:
        if getattr(module, name, None) is original:
            patch(module, name, counting(name, original))
patch(Grid, "load", classmethod(counting("Grid.load", Grid.load.__func__)))
"""
"""Calls of ``Grid.load`` and of each function that expands a preset into run specs (``pipeline.config.grid``),
wherever the package imported them, counted in ``counts``; ``patch``: how an attribute is replaced."""
SNAKEMAKE = f"""patch = setattr
{COUNTING}
import atexit, json, runpy

out, sys.argv = sys.argv[1], ["snakemake", *sys.argv[2:]]
atexit.register(lambda: open(out, "w").write(json.dumps(counts)))
runpy.run_module("snakemake", run_name="__main__")
"""
"""``python -c SNAKEMAKE <counts.json> <snakemake arguments>``: Snakemake with the enumerating functions counted."""


@pytest.fixture
def enumerations(monkeypatch):
    """``COUNTING``'s counts in this process, undone after the test."""
    namespace = {"patch": monkeypatch.setattr}
    exec(COUNTING, namespace)
    return namespace["counts"]


def no_plans(requests, gpus, stop):
    """XLA's plans replaced: every request fits in a byte per device."""
    keys = ("parameters", "trainable_parameters", "param_bytes", "replicated_param_bytes", "optimizer_bytes")
    return [{**dict.fromkeys(keys, 1), "temp_bytes": 0, "total_bytes": 1} for _ in requests]


@pytest.mark.parametrize(
    "verb",
    [
        ["cost", "--preset", "tiny"],
        ["fit", "--preset", "tiny", "--device", "h100", "--gpus", "1"],
        ["preflight", "--preset", "tiny"],
    ],
    ids=lambda verb: verb[0],
)
def test_cost_fit_and_preflight_enumerate_the_grid_once(verb, enumerations, monkeypatch, tmp_path):
    monkeypatch.setattr(fit, "plans_in_subprocess", no_plans)
    outputs = ["--csv", str(tmp_path / "fit.csv"), "--md", str(tmp_path / "fit.md")] if verb[0] == "fit" else []
    assert main([*verb, *outputs]) == 0
    assert dict(enumerations) == ONCE


def test_a_snakemake_parse_enumerates_the_grid_once_and_schedules_its_jobs(tmp_path):
    counts = tmp_path / "counts.json"
    workflow = ["--snakefile", str(ROOT / "workflow" / "Snakefile"), "--directory", str(tmp_path / "work")]
    result = python_run(
        "-c", SNAKEMAKE, str(counts), "all", "preflight", "-n", "-p", "--cores", "1", *workflow, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(counts.read_text()) == ONCE
    scheduled = collections.defaultdict(set)
    for rule, wildcards in re.findall(
        r"^(?:local)?rule (\w+):\n(?:    .*\n)*?    wildcards: (.*)$", result.stdout, re.M
    ):
        scheduled[rule].add(wildcards.split("=", 1)[1])
    grid = Grid.load(load_preset({"preset": "tiny"}))
    assert scheduled["pretrain"] == set(grid.pretraining)
    assert scheduled["finetune"] == set(grid.finetunes)
    assert scheduled["memory_probe"] == set(grid.probes)
    assert scheduled["downstream"] == {job.model_id for job in grid.downstream.values()}
    for name, jobs in grid.analyses.items():
        assert scheduled[name] == set(jobs), name
    from pipeline.planning.jobs import JobSizing

    shapes = training_shapes(JobSizing(grid, None))
    assert scheduled["preflight_job"] == set(shapes) and len(shapes) < len(grid.pretraining)  # one job per shape
    assert shapes["gpt-small-g0-mb0"].runs == ("wt103-small-gpt", "owt-small-gpt")
    assert scheduled["preflight_stage"] == set(stage_jobs(grid)) == set(STAGE_WORK)
    sources = re.findall(r"--source-dir \S+/preflight/(\S+)/train", result.stdout)
    assert len(sources) == len(STAGE_WORK) and set(sources) <= set(shapes), sources
