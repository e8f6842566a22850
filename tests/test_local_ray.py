"""A Ray runtime the pipeline starts itself (pipeline/execution/local_ray.py) starts no worker before a task needs
one: Ray's default starts one idle worker per CPU for the first driver, which the pipeline's jobs never use (a warm
worker is an actor of its own)."""

import pytest
from cli_testkit import python_run, venv_on_path

pytestmark = pytest.mark.slow

SHARED_RAY_THEN_A_TASK = """
import time, psutil, ray
from pipeline.commands import start_shared_local_ray

def workers():
    names = set()
    for process in psutil.Process().children(recursive=True):
        try:
            names.add(process.name())
        except psutil.Error:
            pass
    return {name for name in names if name.startswith("ray::")} - {"ray::DashboardAgent", "ray::RuntimeEnvAgent"}

start_shared_local_ray(2)
seen = set()
for _ in range(16):
    seen |= workers()
    time.sleep(0.5)
print("before a task:", sorted(seen))
print("task ran in process", ray.get(ray.remote(num_cpus=1)(lambda: __import__("os").getpid()).remote()))
print("after a task:", sorted(workers()))
"""


def test_a_local_ray_started_by_the_pipeline_starts_workers_only_for_tasks():
    result = python_run("-c", SHARED_RAY_THEN_A_TASK, env={"PATH": venv_on_path()["PATH"]}, timeout=180)
    lines = result.stdout.splitlines()
    assert result.returncode == 0, result.stderr[-3000:]
    assert "before a task: []" in lines, result.stdout
    assert any(line.startswith("task ran in process") for line in lines), result.stdout
    assert any(line.startswith("after a task: ['ray::") for line in lines), "a task still gets a worker"
