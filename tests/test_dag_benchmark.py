"""`python -m pipeline bench dag` on a synthetic finished DAG: phase markers in job logs + Snakemake benchmarks."""

import csv
import time

import pytest
from cli_testkit import pipeline_verb, python_run

from pipeline.bench.dag import job_timings, kind_table, phase_seconds
from pipeline.cli import main
from pipeline.execution.phases import MARKER

BENCHMARK_HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def benchmark(wall_s: float) -> str:
    """A Snakemake benchmark file of one job that took ``wall_s`` seconds."""
    return BENCHMARK_HEADER + f"{wall_s}\t0:00:00\t1\t1\t1\t1\t0\t0\t50\t{wall_s}\n"


def marker(name: str, at: float, prefix: str = "2026-11-23 10:00:00,000 INFO pipeline.execution.phases: ") -> str:
    return f"{prefix}phase {name} at {at:.3f}\n"


def training_log(t0: float) -> str:
    """A pretraining job's log: driver markers, then the worker's (Ray's prefix), one forwarded late."""
    worker = "(pretrain pid=4242) 2026-11-23 10:00:09,000 INFO pipeline.execution.phases: "
    return (
        marker("interpreter", t0)
        + "some output\n"
        + marker("ray", t0 + 2)
        + marker("task", t0 + 10, worker)
        + marker("setup", t0 + 20, worker)
        + marker("eval", t0 + 25, worker)
        + marker("train", t0 + 29, worker)
        + marker("compile", t0 + 30, worker)
        + marker("train", t0 + 50, worker)
        + marker("eval", t0 + 58, worker)
        + marker("checkpoint", t0 + 62, worker)
        + marker("final-eval", t0 + 63, worker)
        + marker("shutdown", t0 + 71, worker)
        + marker("write", t0 + 70, worker)
        + marker("exit", t0 + 74)
    )


@pytest.fixture
def dag(tmp_path):
    results = tmp_path / "results" / "tiny"
    for run, t0 in (("a-gpt", 1000.0), ("b-gpt", 2000.0)):
        (results / "logs" / "pretrain").mkdir(parents=True, exist_ok=True)
        (results / "logs" / "pretrain" / f"{run}.log").write_text(training_log(t0))
        (results / "benchmarks" / "pretrain").mkdir(parents=True, exist_ok=True)
        (results / "benchmarks" / "pretrain" / f"{run}.tsv").write_text(benchmark(80.0))
    (results / "logs" / "analysis" / "spectra").mkdir(parents=True)
    (results / "logs" / "analysis" / "spectra" / "a-gpt.log").write_text(marker("interpreter", 5) + marker("exit", 9))
    (results / "benchmarks" / "analysis" / "spectra").mkdir(parents=True)
    (results / "benchmarks" / "analysis" / "spectra" / "a-gpt.tsv").write_text(benchmark(6.0))
    (results / "logs" / "corpus").mkdir(parents=True)
    (results / "logs" / "corpus" / "owt.log").write_text("a log from before the markers\n")
    return tmp_path


def test_phase_seconds_sum_each_phase_from_its_marker_to_the_next_in_time_order():
    seconds = phase_seconds(training_log(0.0))
    assert seconds == {
        "interpreter": 2,
        "ray": 8,
        "task": 10,
        "setup": 5,
        "eval": 8,
        "train": 9,
        "compile": 20,
        "checkpoint": 1,
        "final-eval": 7,
        "write": 1,
        "shutdown": 3,
    }


def test_kind_table_means_per_job_and_the_time_outside_the_markers(dag):
    rows = {row["kind"]: row for row in kind_table(job_timings(dag, "tiny"))}
    pretrain = rows["pretrain"]
    assert pretrain["jobs"] == 2 and pretrain["wall_s"] == 160 and pretrain["mean_wall_s"] == 80
    assert pretrain["mean_cpu_s"] == 80
    assert pretrain["compile"] == 20 and pretrain["train"] == 9 and pretrain["final-eval"] == 7
    assert pretrain["outside"] == pytest.approx(6)
    assert rows["analysis/spectra"]["interpreter"] == 4 and rows["analysis/spectra"]["outside"] == pytest.approx(2)
    assert rows["corpus"]["jobs"] == 1 and rows["corpus"]["interpreter"] == 0
    assert rows["total"]["jobs"] == 4 and rows["total"]["wall_s"] == 166


def test_bench_dag_verb_writes_the_table(dag, tmp_path, capsys):
    out = tmp_path / "bench"
    assert main(["bench", "dag", str(dag), "--label", "synthetic", "--out-dir", str(out)]) == 0
    rows = list(csv.DictReader((out / "dag-synthetic.csv").open()))
    assert [row["kind"] for row in rows] == ["pretrain", "analysis/spectra", "corpus", "total"]
    assert float(rows[0]["compile"]) == 20
    assert "| pretrain | 2 | 160.0 | 80.0 | 80.0 |" in (out / "dag-synthetic.md").read_text()
    assert "dag-synthetic.md" in capsys.readouterr().out


def test_bench_dag_sets_a_dag_beside_its_baseline_with_the_ratio(dag, tmp_path):
    baseline = tmp_path / "baseline"
    for run in ("a-gpt", "b-gpt"):
        (baseline / "results" / "tiny" / "logs" / "pretrain").mkdir(parents=True, exist_ok=True)
        (baseline / "results" / "tiny" / "logs" / "pretrain" / f"{run}.log").write_text(training_log(0.0))
        (baseline / "results" / "tiny" / "benchmarks" / "pretrain").mkdir(parents=True, exist_ok=True)
        (baseline / "results" / "tiny" / "benchmarks" / "pretrain" / f"{run}.tsv").write_text(benchmark(100.0))
    out = tmp_path / "bench"
    assert main(["bench", "dag", str(dag), "--label", "now", "--out-dir", str(out), "--baseline", str(baseline)]) == 0
    compared = (out / "dag-now-vs-baseline.md").read_text()
    assert "| pretrain | 2 → 2 | 200.0 | 160.0 | 0.800 | " in compared
    assert "| analysis/spectra | 0 → 1 | — | 6.0 | — | " in compared
    assert "| total | 2 → 4 | 200.0 | 166.0 | 0.830 | " in compared
    header = next(line for line in compared.splitlines() if line.startswith("| kind "))
    assert header.startswith("| kind | jobs | baseline wall_s | wall_s | ratio | interpreter | ray | task | setup |")
    pretrain = next(line for line in compared.splitlines() if line.startswith("| pretrain "))
    assert pretrain.split(" | ")[header.split(" | ").index("compile")] == "20.0 → 20.0"


def test_bench_dag_names_the_missing_logs_folder(tmp_path, capsys):
    assert main(["bench", "dag", str(tmp_path), "--label", "x", "--out-dir", str(tmp_path)]) == 1
    assert "results/tiny/logs does not exist" in capsys.readouterr().err


def test_a_pipeline_job_logs_its_process_start_and_exit(dag, tmp_path):
    started = time.time()
    result = pipeline_verb("bench", "dag", str(dag), "--label", "x", "--out-dir", str(tmp_path), timeout=60)
    assert result.returncode == 0, result.stderr
    seconds = phase_seconds(result.stderr)
    assert list(seconds) == ["interpreter"] and 0 < seconds["interpreter"] < time.time() - started + 1


def test_a_ray_task_logs_its_start_and_return():
    code = "from pipeline.execution.runner import marked_task; assert marked_task('operator:add')(1, 1) == 2"
    result = python_run("-c", code, timeout=60)
    assert result.returncode == 0, result.stderr
    assert list(phase_seconds(result.stderr)) == ["task"]


def test_markers_of_the_same_millisecond_keep_their_log_order():
    assert phase_seconds(marker("task", 5) + marker("shutdown", 5) + marker("exit", 7)) == {"task": 0, "shutdown": 2}


@pytest.mark.slow
def test_a_job_marks_its_ray_stopping_itself_after_the_task_returns():
    """The driver's own markers (not those forwarded from the Ray worker, which Ray can drop as it stops) begin the
    ``shutdown`` phase after the task returned, so an embedded Ray's stop is not counted as the task's last phase."""
    code = (
        "from pipeline.execution.runner import run_on_ray; "
        "assert run_on_ray('operator:add', 1, 1, address=None, num_cpus=1) == 2"
    )
    result = python_run("-c", code, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    driver_lines = "\n".join(line for line in result.stderr.splitlines() if " pid=" not in line)
    assert [m["name"] for m in MARKER.finditer(driver_lines)] == ["ray", "shutdown"], result.stderr[-3000:]
