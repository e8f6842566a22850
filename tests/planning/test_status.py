"""`python -m pipeline status` on a copied results folder: each run's state, and the GPU-hours spent and left."""

import json

from pipeline.cli import main
from pipeline.config import load_preset, pretrain_runs
from pipeline.planning.grid import Grid


def write_lines(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines))


def test_status_prints_done_running_stopped_failed_and_missing_runs(tmp_path, capsys):
    results = tmp_path / "tiny"
    runs = list(pretrain_runs(load_preset({"preset": "tiny"})).values())
    done, running, stopped, failed = runs[:4]
    steps = running.train.steps
    for spec in runs[:4]:
        (results / "runs" / spec.run_id).mkdir(parents=True)
    (results / "runs" / done.run_id / "summary.json").write_text("{}")
    (results / "runs" / done.run_id / "provenance.json").write_text(
        json.dumps({"devices": ["gpu0", "gpu1"], "wall_s": 1.0})
    )
    write_lines(results / "benchmarks" / "pretrain" / f"{done.run_id}.tsv", ["s\th:m:s", "1800.0\t0:30:00"])
    write_lines(
        results / "runs" / running.run_id / "metrics.jsonl",
        [json.dumps({"step": step, "loss": 3.0, "step_s": 36.0}) for step in range(3)],
    )
    (results / "runs" / running.run_id / "checkpoints" / "step-2").mkdir(parents=True)
    (results / "runs" / running.run_id / "checkpoints" / "step-2" / "metadata.json").write_text("{}")
    write_lines(results / "logs" / "pretrain" / f"{running.run_id}.log", ["INFO step 3/10 loss 3.0"])
    write_lines(
        results / "logs" / "pretrain" / f"{stopped.run_id}.log",
        [
            "Traceback ...",
            f"error: {stopped.run_id}: stopped on request (SIGURG: SIGTERM to the job, SLURM's walltime "
            f"warning, or its Ray task cancelled) after 4 of {stopped.train.steps} updates; "
            "a checkpoint was saved in x, "
            "rerun the job to resume from it.",
        ],
    )
    sentence = f"error: `pretrain` for {failed.run_id} ran out of host memory (MemoryError); give the job more memory."
    write_lines(results / "logs" / "pretrain" / f"{failed.run_id}.log", ["Traceback ...", sentence])
    write_lines(results / "fit.csv.rows.jsonl", [json.dumps({"key": "k"}), "{}", "{}"])  # two rows kept
    (results / ".fit.csv.attempt.json").write_text(json.dumps({"attempt": 1, "from_step": 0, "outcome": "stopped"}))

    assert main(["status", "--preset", "tiny", "--results", str(results)]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[2:]}
    assert rows[done.run_id].split()[1] == "done"
    assert rows[running.run_id].split(None, 2)[1:] == [
        "running",
        f"step 3 of {steps}, chunk 1 of 1, checkpoint step-2, ETA {36 * (steps - 3) / 60:.0f} min",
    ]
    assert rows[stopped.run_id].split(None, 2)[1:] == [
        "stopped",
        f"stopped by walltime at step 4 of {stopped.train.steps} (SIGURG); checkpoint none, the next chunk resumes it",
    ]
    assert rows[failed.run_id].split(None, 2)[1:] == ["failed", sentence]
    assert all(rows[spec.run_id].split()[1:] == ["missing", "not", "started"] for spec in runs[4:])
    missing = sum(line.split()[1] == "missing" for line in rows.values())
    assert rows["1"] == f"1 done, 1 running, 1 stopped, 1 failed, {missing} missing of {missing + 4} runs"
    assert rows["fit"] == f"fit fit.csv: 2 of {len(Grid.load(load_preset({'preset': 'tiny'})).workloads)} rows, stopped"
    spent = 1800 * 2 / 3600 + 3 * 36 / 3600
    assert rows["GPU-hours:"].startswith(f"GPU-hours: {spent:,.1f} spent")
