"""A retry of a training or data job runs only after a walltime stop or a preemption (pipeline/train/attempts.py): after
a real failure it ends within seconds, repeating the failure's sentence; a new call (attempt 1) always runs."""

import json
import re
import shutil
import time
from pathlib import Path

import pytest
from cli_testkit import ROOT, pipeline_verb, pretrain_args, snakemake_run, tiny_spec

from pipeline.cli import main
from pipeline.execution.errors import RunStopped
from pipeline.execution.phases import MARKER
from pipeline.planning.status import run_state
from pipeline.train.attempts import ATTEMPT_FILE, AttemptRefused, data_attempt_file, recorded_attempt

WHAT = "`pretrain` for runs/r"
BAD_FILE = "data/train.jsonl, line 3: not JSON; fix or remove that line."


def attempt(run_dir: Path, number: int, raises: BaseException | None = None) -> bool:
    """Attempt ``number`` of a job of ``run_dir`` whose work raises ``raises``; whether its work ran."""
    ran = []
    with recorded_attempt(run_dir, number, WHAT):
        ran.append(True)
        if raises is not None:
            raise raises
    return bool(ran)


def saved_checkpoint(run_dir: Path, step: int) -> None:
    (run_dir / "checkpoints" / f"step-{step}").mkdir(parents=True)
    (run_dir / "checkpoints" / f"step-{step}" / "metadata.json").write_text("{}")


def test_a_retry_after_a_real_failure_refuses_at_once(tmp_path):
    """Every later attempt, within a second (the sentence, repeating the failure's: the pretrain verb's test)."""
    with pytest.raises(ValueError):
        attempt(tmp_path, 1, ValueError(BAD_FILE))
    started = time.monotonic()
    for number in (2, 3):
        with pytest.raises(AttemptRefused, match=f"attempt {number}: not run, as attempt 1 failed"):
            attempt(tmp_path, number)
    assert time.monotonic() - started < 1


def test_a_retry_after_a_walltime_stop_trains_and_a_new_call_always_trains(tmp_path):
    saved_checkpoint(tmp_path, 9)
    with pytest.raises(RunStopped):
        attempt(tmp_path, 1, RunStopped("r: stopped on request (SIGURG: ...) after 10 of 40 updates; ..."))
    assert json.loads((tmp_path / ATTEMPT_FILE).read_text()) == {
        "attempt": 1,
        "from_step": 9,
        "outcome": "stopped",
        "step": 9,
    }
    assert attempt(tmp_path, 2)
    with pytest.raises(ValueError):
        attempt(tmp_path, 3, ValueError(BAD_FILE))
    assert attempt(tmp_path, 1), "a new call trains whatever the record says"
    assert json.loads((tmp_path / ATTEMPT_FILE).read_text())["outcome"] == "done"


def test_a_retry_after_an_attempt_killed_without_a_word_trains_only_if_it_saved_a_checkpoint_or_was_requeued(tmp_path):
    saved_checkpoint(tmp_path, 4)
    (tmp_path / ATTEMPT_FILE).write_text(json.dumps({"attempt": 1, "from_step": 4, "outcome": "running"}))
    with pytest.raises(AttemptRefused, match=r"attempt 1 ended without a sentence .* no checkpoint after step 4;"):
        attempt(tmp_path, 2)
    saved_checkpoint(tmp_path, 8)
    assert attempt(tmp_path, 2)
    (tmp_path / ATTEMPT_FILE).write_text(json.dumps({"attempt": 2, "from_step": 8, "outcome": "running"}))
    with pytest.raises(AttemptRefused, match=r"attempt 2 ended without a sentence .* no checkpoint after step 8;"):
        attempt(tmp_path, 3)
    assert attempt(tmp_path, 2), "SLURM requeued attempt 2 after a preemption: it runs again"


def test_the_pretrain_verb_refuses_a_retry_after_a_real_failure_before_ray_starts(tmp_path):
    run_dir = tmp_path / "run"
    with pytest.raises(ValueError):
        with recorded_attempt(run_dir, 1, f"`pretrain` for {run_dir}"):
            raise ValueError(BAD_FILE)
    started = time.monotonic()
    result = pipeline_verb(*pretrain_args(tiny_spec(), run_dir, tmp_path, "--attempt", "2"), timeout=60)
    assert result.returncode == 1 and time.monotonic() - started < 30, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: `pretrain` for {run_dir}, attempt 2: not run, as attempt 1 failed and only a stop by walltime "
        f"or preemption is retried (fix the cause, then run snakemake again); attempt 1 said: {BAD_FILE}"
    )
    assert "Submitting" not in result.stderr


def test_a_data_job_retried_after_a_real_failure_ends_at_once_repeating_its_sentence(tmp_path, capsys):
    """The corpus export (the token cache's verb is wrapped alike): attempt 1 fails for real, attempt 2 repeats its
    sentence before any work, within a second; a new call (attempt 1) runs again."""
    out = tmp_path / "corpus"
    command = ["corpus", "--source", json.dumps({"kind": "tiny", "corpus": "nowhere"}), "--out", str(out)]
    assert main([*command, "--attempt", "1"]) == 1
    failed = json.loads(data_attempt_file(out).read_text())
    assert failed["outcome"] == "failed" and "Unknown tiny corpus 'nowhere'" in failed["sentence"], failed
    capsys.readouterr()
    started = time.monotonic()
    assert main([*command, "--attempt", "2"]) == 1
    assert time.monotonic() - started < 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: `corpus` for {out}, attempt 2: not run, as attempt 1 failed and only a stop by walltime or preemption "
        f"is retried (fix the cause, then run snakemake again); attempt 1 said: {failed['sentence'][len('error: ') :]}"
    )


def test_snakemake_does_not_train_a_run_again_after_its_first_attempt_failed(tiny_data_workdir, tmp_path):
    """``--retries 2`` and a tiny run whose learning rate makes its loss NaN after an update: attempt 1 trains and
    fails; attempts 2 and 3 (a retry's exit is still a failure to Snakemake) each end within seconds, before Ray,
    repeating attempt 1's sentence."""
    workdir, run = tmp_path / "retries", "results/tiny/runs/wt103-small-gpt"
    shutil.copytree(tiny_data_workdir, workdir, ignore=shutil.ignore_patterns("locks"))
    train = "steps: 40, lr: 1.0e+12, warmup_fraction: 0.0, eval_every: 40, eval_batches: 1"
    result = snakemake_run(
        workdir,
        "--profile",
        str(ROOT / "profiles" / "ci"),
        f"{run}/summary.json",
        "--retries",
        "2",
        "--config",
        "preset=tiny",
        f"pretrain={{wt103-small: {{train: {{{train}}}}}}}",
    )
    assert result.returncode != 0
    record = json.loads((workdir / run / ATTEMPT_FILE).read_text())
    assert record["attempt"] == 1 and record["outcome"] == "failed", record
    nan = re.fullmatch(r"error: wt103-small-gpt: training loss became nan at step (\d+); .*\.", record["sentence"])
    records = [json.loads(line) for line in (workdir / run / "metrics.jsonl").read_text().splitlines()]
    assert [record["step"] for record in records if "loss" in record] == list(range(int(nan[1]))), records
    log_path = workdir / "results" / "tiny" / "logs" / "pretrain" / "wt103-small-gpt.log"
    log = log_path.read_text()
    refusal = (
        "attempt 3: not run, as attempt 1 failed and only a stop by walltime or preemption is retried (fix the "
        f"cause, then run snakemake again); attempt 1 said: {nan[0].removeprefix('error: ')}"
    )
    assert log.strip().splitlines()[-1].endswith(refusal), log[-3000:]
    assert "Submitting pretrain" not in log, log[-3000:]
    assert log_path.stat().st_mtime - float(MARKER.search(log)["time"]) < 30, log[-3000:]
    state = run_state(workdir / "results" / "tiny", "pretrain", "wt103-small-gpt", 40, gpus=0, chunks=1)
    assert (state.state, state.detail) == ("failed", log.strip().splitlines()[-1])
