"""Warm Ray workers (pipeline/execution/warm_workers.py): jobs on an existing Ray cluster run in long-lived workers,
and what one job leaves in its worker changes nothing of the next one's results; a worker whose job raised is not
reused; a job's log shows its output while it runs; a job whose driver was killed stops and frees its worker; a job
whose worker was killed ends with one sentence; the pool evicts only the idle workers a new one needs room from."""

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from cli_testkit import PIPELINE, ROOT, pipeline_verb, pretrain_args, tiny_spec, trained_steps

from pipeline.execution import warm_workers

TIMINGS = {"tokens_per_s", "step_s", "throughput/loading_time", "mean_tokens_per_s"}
"""Wall-clock measurements in a run's metrics and summary: the only values two runs of one spec may differ in."""


def pretrain(spec, run_dir: Path, data: Path, *ray: str) -> subprocess.CompletedProcess:
    return pipeline_verb(*pretrain_args(spec, run_dir, data, ray=ray))


def start_pretrain(spec, run_dir: Path, data: Path, log: Path, ray_head: str) -> subprocess.Popen:
    """A pretraining job's driver on the warm path, its stderr (the job's log) going to ``log``."""
    with log.open("w") as stderr:
        return subprocess.Popen(
            [*PIPELINE, *pretrain_args(spec, run_dir, data, ray=("--ray-address", ray_head))],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={**os.environ, "RAY_AUTH_MODE": "disabled"},
        )


def wait_for(condition, timeout_s: float) -> float:
    """Seconds until ``condition()`` held (polled every 0.2 s); ``timeout_s`` plus a bit if it never did."""
    started = time.monotonic()
    while not condition() and time.monotonic() - started < timeout_s:
        time.sleep(0.2)
    return time.monotonic() - started


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def warm_process(stderr: str) -> int:
    """The process id of the warm worker a job ran in, from its log line."""
    found = re.search(r"Submitting pretrain to Ray \(.*\), warm worker \S+ \(process (\d+)\)", stderr)
    assert found, stderr[-3000:]
    return int(found[1])


def results(run_dir: Path) -> dict:
    """A run's results without its wall-clock timings: every metric, the summary, each checkpoint's checksums (of
    every file but ``metadata.json``, which holds the time of the save)."""
    metrics = [
        {key: value for key, value in json.loads(line).items() if key not in TIMINGS}
        for line in (run_dir / "metrics.jsonl").read_text().splitlines()
    ]
    summary = {
        key: value for key, value in json.loads((run_dir / "summary.json").read_text()).items() if key not in TIMINGS
    }
    checksums = {
        path.parent.name: {
            name: digest for name, digest in json.loads(path.read_text()).items() if name != "metadata.json"
        }
        for path in sorted((run_dir / "checkpoints").glob("step-*/checksums.json"))
    }
    return {"metrics": metrics, "summary": summary, "checksums": checksums}


def test_a_job_run_twice_in_a_warm_worker_gives_the_results_of_a_fresh_process(tiny_data, ray_head, tmp_path):
    spec = tiny_spec(steps=8, eval_every=4, checkpoint_every=4, eval_batches=1)
    fresh = pretrain(spec, tmp_path / "fresh", tiny_data, "--ray-address", ray_head, "--ray-fresh-process")
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert f"Submitting pretrain to Ray ({ray_head})\n" in fresh.stderr
    warm = [pretrain(spec, tmp_path / f"warm-{n}", tiny_data, "--ray-address", ray_head) for n in (1, 2)]
    assert all(run.returncode == 0 for run in warm), warm[0].stderr[-3000:] + warm[1].stderr[-3000:]
    assert warm_process(warm[0].stderr) == warm_process(warm[1].stderr), "the second job ran in another process"
    expected = results(tmp_path / "fresh")
    assert expected["checksums"] and len(expected["metrics"]) > spec.train.steps
    for n in (1, 2):
        assert results(tmp_path / f"warm-{n}") == expected, f"warm run {n}"


def test_a_warm_jobs_log_shows_its_training_a_killed_driver_or_a_raising_job_frees_its_worker(
    tiny_data, ray_head, tmp_path
):
    """A job whose driver was killed stops with a checkpoint and its worker ends within seconds (Ray records the
    driver's end); a job that raised (a NaN loss) ends with its sentence; neither worker runs the next job, which
    succeeds."""
    steps = 5000
    spec = tiny_spec(steps=steps, eval_every=steps, checkpoint_every=steps, eval_batches=1)
    run_dir, log = tmp_path / "orphan", tmp_path / "orphan.log"
    driver = start_pretrain(spec, run_dir, tiny_data, log, ray_head)
    wait_for(
        lambda: (trained_steps(run_dir) >= 20 and "phase train at" in log.read_text()) or driver.poll() is not None,
        timeout_s=300,
    )
    assert driver.poll() is None, log.read_text()[-3000:]
    assert "phase train at" in log.read_text(), "the job's log showed nothing of its training while it ran"
    pid = warm_process(log.read_text())
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    freed_in = wait_for(lambda: not process_exists(pid), timeout_s=90)
    print(f"the worker ended {freed_in:.1f} s after its driver's SIGKILL")
    assert freed_in < 15, f"the killed driver's warm worker still ran {freed_in:.0f} s later"
    done = trained_steps(run_dir)
    assert 20 <= done < steps and not (run_dir / "summary.json").exists()
    assert (run_dir / "checkpoints" / f"step-{done - 1}" / "metadata.json").is_file(), "no checkpoint at the stop"

    nan = tiny_spec(steps=6, lr=1e12, warmup_fraction=0.0, eval_every=6, checkpoint_every=6, eval_batches=1)
    failed = pretrain(nan, tmp_path / "nan", tiny_data, "--ray-address", ray_head)
    assert failed.returncode == 1
    assert (
        failed.stderr.strip().splitlines()[-1].startswith("error: wt103-small-gpt: training loss became nan at step ")
    ), failed.stderr[-3000:]
    spec = tiny_spec(steps=4, eval_every=4, checkpoint_every=4, eval_batches=1)
    after = pretrain(spec, tmp_path / "next", tiny_data, "--ray-address", ray_head)
    assert after.returncode == 0, after.stderr[-3000:]
    assert warm_process(after.stderr) not in (warm_process(failed.stderr), pid), "a freed worker ran the next job"
    assert json.loads((tmp_path / "next" / "summary.json").read_text())["steps_done"] == 4


def test_a_warm_worker_killed_under_its_job_ends_the_job_with_one_sentence(tiny_data, ray_head, tmp_path):
    spec = tiny_spec(steps=5000, eval_every=5000, checkpoint_every=5000, eval_batches=1)
    log = tmp_path / "job.log"
    driver = start_pretrain(spec, tmp_path / "run", tiny_data, log, ray_head)
    wait_for(lambda: "phase setup at" in log.read_text() or driver.poll() is not None, timeout_s=300)
    assert driver.poll() is None, log.read_text()[-3000:]
    os.kill(warm_process(log.read_text()), signal.SIGKILL)
    driver.wait(timeout=120)
    last_line = log.read_text().strip().splitlines()[-1]
    assert driver.returncode == 1 and last_line.startswith(
        f"error: the Ray worker running `pretrain` for {tmp_path / 'run'} died (WarmWorkerLost: "
    ), log.read_text()[-3000:]


def test_the_pool_keeps_workers_of_each_key_warm_and_evicts_only_the_oldest_idle_one_when_full(monkeypatch):
    """In process, Ray faked: jobs alternating between two keys on 2 CPUs keep one worker of each; a third key or a
    fresh-process task evicts the oldest idle worker only; a worker whose CPU (or GPU) a new one waits for is killed."""
    cluster, killed = {"CPU": 2}, []
    monkeypatch.setattr(warm_workers, "_cluster_resources", lambda: cluster)
    monkeypatch.setattr(warm_workers, "_kill", killed.extend)
    pool = warm_workers.WarmPool()

    def job(key: str, gpus: float = 0, ends: bool = True) -> str:
        pool.register(name := pool.acquire(key, gpus)[0], name)  # a fake worker: its handle is its name
        if ends:
            pool.release(name, True)
        return name

    a, b, *rest = [job(key) for key in "ABABAB"]
    c = job("C")
    assert rest == [a, b, a, b] and killed == [a] and job("B") == b
    assert pool.evict_idle(0) == 1 and killed == [a, c] and pool.evict_idle(0) == 0
    busy, _, _ = job("A", ends=False), job("D", ends=False), job("E", ends=False)
    pool.release(busy, True)
    assert killed == [a, c, b, busy], "E waits for a CPU: the idle B made room for D, A's end for E"
    cluster.update(CPU=8, GPU=1)
    g = job("G", 1)
    assert job("H", 1) != g and killed[-1] == g
    pool.workers.clear()  # its reaper thread outlives the test: no fake worker left for the real ray.kill in 120 s
