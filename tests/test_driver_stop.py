"""SIGTERM to a local `snakemake` driver that hosts the shared Ray (pipeline/execution/driver_stop.py): its running
training job, in a warm Ray worker (pipeline/execution/warm_workers.py), stops through its own stop path (a
checkpoint at the stop step), Ray after it, the lock is released, and a rerun resumes from that checkpoint, at
another micro-batch (not part of the run's identity) which its summary records."""

import json
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from cli_testkit import ROOT, snakemake_in, trained_steps, venv_on_path

RUN = "results/tiny/runs/wt103-small-gpt"
STEPS = 80


def driver_args(workdir: Path, micro_batch: int | None = None) -> list[str]:
    train = f"steps: {STEPS}, eval_every: {STEPS}, micro_batch_size: {micro_batch or 'null'}"
    return [
        *snakemake_in(workdir),
        "--profile",
        str(ROOT / "profiles" / "ci"),
        f"{RUN}/summary.json",
        "--config",
        "preset=tiny",
        f"pretrain={{wt103-small: {{train: {{{train}}}}}}}",
    ]


def test_sigterm_to_the_local_driver_stops_its_training_job_with_a_checkpoint_and_a_rerun_resumes(
    tiny_data_workdir, tmp_path
):
    workdir = tmp_path / "driver"
    shutil.copytree(tiny_data_workdir, workdir, ignore=shutil.ignore_patterns("locks"))
    env = venv_on_path()
    driver = subprocess.Popen(
        driver_args(workdir), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
    )
    deadline = time.time() + 300
    while trained_steps(workdir / RUN) < 10 and time.time() < deadline and driver.poll() is None:
        time.sleep(0.2)
    driver.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    _, stderr = driver.communicate(timeout=300)
    stopped_in = time.monotonic() - signalled
    print(f"driver stopped {stopped_in:.1f} s after SIGTERM")
    assert driver.returncode != 0 and stopped_in < 60, stderr[-3000:]
    assert "SIGTERM: stopping 1 running job process(es)" in stderr, stderr[-3000:]
    assert not list((workdir / ".snakemake").glob("locks/*")), "the driver left its lock"
    log = (workdir / "results" / "tiny" / "logs" / "pretrain" / "wt103-small-gpt.log").read_text()
    assert re.search(r"Submitting pretrain to Ray \(.*\), warm worker ", log), log[-3000:]
    stop = re.search(rf"wt103-small-gpt: stopped on request \(SIGINT: .*\) after (\d+) of {STEPS} updates", log)
    assert stop, log[-3000:]
    assert (workdir / RUN / "checkpoints" / f"step-{int(stop[1]) - 1}" / "metadata.json").is_file()

    assert not (workdir / RUN / "summary.json").exists()

    rerun = subprocess.run(
        driver_args(workdir, micro_batch=4), cwd=ROOT, capture_output=True, text=True, env=env, timeout=600
    )
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    summary = json.loads((workdir / RUN / "summary.json").read_text())
    resumed = int(stop[1])
    assert summary["resumed_from_step"] == resumed and summary["steps_done"] == STEPS
    steps = [
        json.loads(line)["step"]
        for line in (workdir / RUN / "metrics.jsonl").read_text().splitlines()
        if '"loss"' in line
    ]
    assert steps == list(range(STEPS))
    assert summary["micro_batches"] == [
        {"from_step": 0, "micro_batch": 8, "gradient_accumulation": 1},
        {"from_step": resumed, "micro_batch": 4, "gradient_accumulation": 2},
    ], "a resume at another micro-batch (a re-planned fit table) is recorded from the update it started at"
