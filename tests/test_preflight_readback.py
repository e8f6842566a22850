"""What the grid reads back from a preflight report (pipeline/planning/preflight_rows.py): measured throughput in the
cost preview and the training walltimes, and the stop of a red row in the grid's dry run."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.config import load_preset, pretrain_runs
from pipeline.planning.cost import preview
from pipeline.planning.jobs import STARTUP_MIN, JobSizing
from pipeline.preflight.report import COLUMNS, csv_text, with_verdicts
from pipeline.site import EXAMPLE, load_site

ROOT = Path(__file__).resolve().parent.parent
TINY = load_preset({"preset": "tiny"})
TINY_RUNS = pretrain_runs(TINY)


def write_report(path: Path, shape: str, run_id: str, device: str, **changes) -> Path:
    """A preflight report with one row, green unless ``changes`` make it red."""
    row = {"shape": shape, "run_id": run_id, "runs": 2, "device_label": device, "status": "ok", "error": "",
           "tokens_per_s_per_device": 100.0, "peak_memory_bytes": 10**9, "budget_bytes": 2 * 10**9, **changes}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(csv_text(with_verdicts([row]), COLUMNS))
    return path


def test_a_preflight_row_with_half_the_throughput_doubles_the_walltime_and_the_cost(tmp_path, capsys):
    site = load_site(EXAMPLE)
    report = tmp_path / "preflight.csv"
    minutes, hours = [], []
    for tokens_per_s in (2.0, 1.0):
        write_report(report, "gpt-small-g1-mb0", "wt103-small-gpt", "h100", tokens_per_s_per_device=tokens_per_s)
        job = JobSizing(TINY, site, preflight_table=report).training("wt103-small-gpt")
        assert job.gpus == 1
        minutes.append(job.minutes - STARTUP_MIN)
        _, runs = preview("tiny", "h100", preflight=report)
        [row] = [row for row in runs if row["run_id"] == "wt103-small-gpt"]
        assert row["source"] == "preflight"
        hours.append(row["gpu_hours"])
    assert abs(minutes[1] - 2 * minutes[0]) <= 1, minutes
    assert hours[1] == pytest.approx(2 * hours[0])
    assert main(["cost", "--preset", "tiny", "--device", "h100", "--preflight", str(report)]) == 0
    assert f"measured by the preflight: training tokens/s per GPU from {report}" in capsys.readouterr().out


def test_a_preflight_row_of_another_device_is_not_read(tmp_path):
    report = write_report(tmp_path / "preflight.csv", "gpt-small-g1-mb0", "wt103-small-gpt", "cpu")
    _, runs = preview("tiny", "h100", preflight=report)
    assert {row["source"] for row in runs} == {"estimate"}


RED_ROWS = {
    "failed": ({"status": "failed", "error": "the job ran out of accelerator memory"},
               "preflight.csv: the preflight of shape gpt-small-g0-mb0 (run {run}) failed (the job ran out "
               "of accelerator memory); fix that and rerun the preflight"),
    "over plan": ({"peak_memory_bytes": 3 * 10**9},
                  "preflight.csv: the preflight of shape gpt-small-g0-mb0 (run {run}) peaked at 3 GB, over "
                  "its plan's 2 GB; set a smaller micro-batch"),
}


@pytest.mark.parametrize("red", sorted(RED_ROWS))
def test_a_red_preflight_row_stops_the_grids_dry_run_with_one_sentence(tmp_path, red):
    changes, sentence = RED_ROWS[red]
    report = write_report(tmp_path / "results" / "tiny" / "preflight.csv", "gpt-small-g0-mb0", "wt103-small-gpt",
                          "cpu", **changes)
    expected = sentence.format(run="wt103-small-gpt")
    with pytest.raises(ValueError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        JobSizing(TINY, None, preflight_table=report).training("wt103-small-gpt")
    JobSizing(TINY, None, preflight_table=report).training("wt103-medium-gpt")
    result = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--snakefile",
                             str(ROOT / "workflow" / "Snakefile"), "--directory", str(tmp_path), "--cores", "1"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode != 0
    output = " ".join((result.stdout + result.stderr).split())
    assert any(sentence.format(run=run) in output for run in ("wt103-small-gpt", "owt-small-gpt")), output[-2000:]


def test_a_preflight_job_whose_verb_fails_writes_its_sentence_and_its_row_stops_the_run(tmp_path):
    """A job given a GPU that its Ray cluster lacks fails; its row says so, and the report's red row stops the run."""
    row = tmp_path / "row.json"
    spec = TINY_RUNS["wt103-small-gpt"].to_json()
    assert main(["preflight-job", "--spec", spec, "--shape", "gpt-small-g0-mb0", "--runs", "2", "--job-dir",
                 str(tmp_path / "job"), "--cache", str(tmp_path / "cache"), "--tokenizer", str(tmp_path / "tok"),
                 "--micro-batch", "0", "--device-label", "cpu", "--gpus", "1", "--ray-num-cpus", "1",
                 "--row", str(row)]) == 0
    failed = json.loads(row.read_text())
    assert failed["status"] == "failed" and "asks for 1 GPU(s) but the Ray cluster" in failed["error"], failed
    report = tmp_path / "preflight.csv"
    report.write_text(csv_text(with_verdicts([failed]), COLUMNS))
    with pytest.raises(ValueError, match=r"the preflight of shape gpt-small-g0-mb0 \(run wt103-small-gpt\) failed "
                                         r"\(.*asks for 1 GPU\(s\)"):
        JobSizing(TINY, None, preflight_table=report).training("wt103-small-gpt")
