"""What the grid reads back from a preflight report (pipeline/planning/measured.py): measured throughput in the
cost preview and the training walltimes (a pretraining shape's; a fine-tune method's), and the stop of a red row (a
training shape's; a stage job's) in the grid's dry run; which source answers a job's tokens/s (a stale or missing fit
row: tests/planning/test_jobs.py)."""

import argparse
import json
from pathlib import Path

import pytest
from cli_testkit import dry_run

from pipeline.artifacts import csv_text
from pipeline.cli import main
from pipeline.config import load_preset, pretrain_runs
from pipeline.config.site import DEFAULT_CHUNK_STARTUP_MIN, EXAMPLE, load_site
from pipeline.planning.cost import preview
from pipeline.planning.grid import Grid
from pipeline.planning.jobs import JobSizing
from pipeline.planning.measured import THROUGHPUT_COLUMNS, MeasuredTable, PreflightError
from pipeline.planning.placement import JobRequest
from pipeline.preflight.report import COLUMNS, markdown, with_verdicts

TINY = load_preset({"preset": "tiny"})
TINY_RUNS = pretrain_runs(TINY)


def report_row(shape: str, run_id: str, device: str, **changes) -> dict:
    """A preflight report's row, green unless ``changes`` make it red."""
    return {
        "shape": shape,
        "run_id": run_id,
        "runs": 2,
        "device_label": device,
        "status": "ok",
        "error": "",
        "tokens_per_s_per_device": 100.0,
        "peak_memory_bytes": 10**9,
        "budget_bytes": 2 * 10**9,
        **changes,
    }


def write_report(path: Path, shape: str, run_id: str, device: str, **changes) -> Path:
    """A preflight report with one row (``report_row``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(csv_text(with_verdicts([report_row(shape, run_id, device, **changes)]), COLUMNS))
    return path


LORA_MEASURED, LORA_OTHER = "ft-wt103-owt-diffeq6-n3-lora", "ft-wt103-owt-diffeq6-n6-lora"
"""The tiny preset's first LoRA fine-tune (what its preflight stage job ``finetune-lora`` trains) and another LoRA
fine-tune, to N' = 6 steps rather than 3 (more FLOPs per token)."""
MEASURED_ROWS = {
    "pretraining shape": (
        {"shape": "gpt-small-g1-mb0", "run_id": "wt103-small-gpt"},
        ("wt103-small-gpt", "wt103-small-diffeq"),
        "measured by the preflight: training tokens/s per GPU from {report}",
    ),
    "fine-tune method": (
        {"shape": "finetune-lora", "run_id": LORA_MEASURED, "kind": "finetune-lora"},
        (LORA_OTHER, "ft-wt103-owt-diffeq6-n3-full"),
        "(a fine-tune: the MFU measured for its method",
    ),
}
"""Per kind of green row: the row, (a job it sizes, a job it leaves an estimate) and what the cost preview says."""


@pytest.mark.parametrize("measured", sorted(MEASURED_ROWS))
def test_a_preflight_row_with_half_the_throughput_doubles_the_walltime_and_the_cost(tmp_path, capsys, measured):
    """A shape's row sizes its runs; a fine-tune's row carries its measured FLOP rate to every fine-tune of its method
    at that fine-tune's own FLOPs per token; another model's runs and the other method's fine-tunes stay estimates."""
    row, (sized, estimated), said = MEASURED_ROWS[measured]
    site, report, workloads = load_site(EXAMPLE), tmp_path / "preflight.csv", Grid.load(TINY).workloads
    flops = workloads[row["run_id"]].forward_flops / workloads[sized].forward_flops
    minutes, hours = [], []
    for tokens_per_s in (2.0, 1.0):
        write_report(report, device="h100", tokens_per_s_per_device=tokens_per_s, **row)
        job = JobSizing(Grid.load(TINY), site, preflight_table=report).training(sized)
        assert job.gpus == 1
        minutes.append(job.minutes - DEFAULT_CHUNK_STARTUP_MIN)
        rows = {item["run_id"]: item for item in preview(Grid.load(TINY), "h100", preflight=report)[1]}
        assert (rows[sized]["source"], rows[estimated]["source"]) == ("preflight", "estimate")
        assert rows[sized]["tokens_per_s_per_gpu"] == pytest.approx(tokens_per_s * flops)
        hours.append(rows[sized]["gpu_hours"])
    assert abs(minutes[1] - 2 * minutes[0]) <= 1, minutes
    assert hours[1] == pytest.approx(2 * hours[0])
    assert main(["cost", "--preset", "tiny", "--device", "h100", "--preflight", str(report)]) == 0
    assert said.format(report=report) in capsys.readouterr().out


@pytest.mark.parametrize(("run_id", "device"), [("wt103-small-gpt", "cpu"), ("wt103-renamed-gpt", "h100")])
def test_a_preflight_row_of_another_device_or_of_a_job_the_preset_no_longer_has_is_not_read(tmp_path, run_id, device):
    """A report of another device, or of an earlier version of the preset (a run since renamed), leaves the estimates,
    and the preflight's own jobs, sizable: the preflight can be rerun."""
    report = write_report(tmp_path / "preflight.csv", "gpt-small-g1-mb0", run_id, device)
    _, runs = preview(Grid.load(TINY), "h100", preflight=report)
    assert {row["source"] for row in runs} == {"estimate"}
    assert JobSizing(Grid.load(TINY), load_site(EXAMPLE), preflight_table=report).training("wt103-small-gpt").gpus == 1


OOM = "the job ran out of accelerator memory"
RERUN = "delete {row} and {report}, and run the command again: it reruns that job before the grid."
STAGE_ROWS = {
    "finetune-lora": "ft-wt103-owt-diffeq6-n3-lora",
    "finetune-full": "ft-wt103-owt-diffeq6-n3-full",
    "downstream": "owt-large-gpt",
    "spectra": "owt-medium-diffeq",
    "lyapunov": "owt-medium-diffeq",
    "frontier": "owt-medium-diffeq",
}
"""Per stage job of the tiny preset: the grid job it ran as."""
RED_ROWS = {
    "shape failed": (
        ("gpt-small-g0-mb0", "wt103-small-gpt", "preflight/gpt-small-g0-mb0/row.json"),
        {"status": "failed", "error": OOM},
        f"the preflight of shape gpt-small-g0-mb0 (run wt103-small-gpt) failed ({OOM}); fix that, {RERUN}",
    ),
    "shape over plan": (
        ("gpt-small-g0-mb0", "wt103-small-gpt", "preflight/gpt-small-g0-mb0/row.json"),
        {"peak_memory_bytes": 3 * 10**9},
        "the preflight of shape gpt-small-g0-mb0 (run wt103-small-gpt) peaked at 3 GB, over its plan's 2 GB; set a "
        f"smaller micro-batch (train.micro_batch_size, or rerun `fit`), then {RERUN}",
    ),
    **{
        f"{kind} failed": (
            (kind, run_id, f"preflight/stages/{kind}/row.json"),
            {"kind": kind, "status": "failed", "error": OOM},
            f"the preflight of stage job {kind} ({kind} of run {run_id}) failed ({OOM}); fix that, {RERUN}",
        )
        for kind, run_id in STAGE_ROWS.items()
    },
}
"""Per red row (of a training shape, or of each stage job): (its shape, grid job and row file), its columns and the
sentence that stops the grid."""


@pytest.mark.parametrize("red", sorted(RED_ROWS))
def test_a_red_preflight_row_stops_every_grid_job_with_its_sentence(tmp_path, red):
    """The grid starts on a green preflight only: a red row stops every grid job, naming the row and what to do; the
    preflight's own jobs are still sized."""
    (shape, run_id, row_file), changes, sentence = RED_ROWS[red]
    report = write_report(tmp_path / "preflight.csv", shape, run_id, "cpu", **changes)
    jobs = JobSizing(Grid.load(TINY), None, preflight_table=report)
    with pytest.raises(PreflightError) as error:
        jobs.green()  # what every grid job's resources ask first (workflow/rules/resources.smk)
    assert str(error.value) == f"{report}: {sentence.format(row=tmp_path / row_file, report=report)}"
    assert jobs.training("wt103-medium-gpt") == JobRequest(micro_batch=0)


@pytest.mark.slow
def test_a_preflight_job_whose_verb_fails_writes_its_sentence_in_a_red_row(tmp_path):
    """A job given a GPU that its Ray cluster lacks fails; its row says so, and its verdict is red."""
    row = tmp_path / "row.json"
    job = ["--spec", TINY_RUNS["wt103-small-gpt"].to_json(), "--shape", "gpt-small-g0-mb0", "--runs", "2"]
    inputs = ["--job-dir", str(tmp_path / "job"), "--cache", str(tmp_path / "cache"), "--tokenizer", str(tmp_path)]
    where = ["--micro-batch", "0", "--device-label", "cpu", "--gpus", "1", "--ray-num-cpus", "1", "--row", str(row)]
    assert main(["preflight-job", *job, *inputs, *where]) == 0
    [failed] = with_verdicts([json.loads(row.read_text())])
    assert failed["status"] == failed["verdict"] == "failed", failed
    assert "asks for 1 GPU(s) but the Ray cluster" in failed["error"], failed


def test_a_walltime_stop_is_a_stopped_row_that_says_its_step_and_stops_no_run(tmp_path, monkeypatch):
    """A preflight job its walltime warning stopped records where it got to, is not red and blocks nothing."""
    from pipeline.execution import runner
    from pipeline.preflight.commands import _measured_row
    from pipeline.train.loop import TrainingStoppedError

    def stopped(*args, **keywords):
        raise TrainingStoppedError(
            "wt103-small-gpt: stopped on request (SIGURG: SIGTERM to the job, SLURM's walltime "
            "warning, or its Ray task cancelled) after 7 of 20 updates; a checkpoint was saved"
        )

    monkeypatch.setattr(runner, "run_on_ray", stopped)
    row = tmp_path / "row.json"
    ray = {"ray_address": None, "ray_num_cpus": None, "gpus": 0, "ray_fresh_process": False}
    args = argparse.Namespace(row=row, runs=2, device_label="cpu", **ray)
    row_before = {"shape": "gpt-small-g0-mb0", "kind": "pretrain", "run_id": "wt103-small-gpt"}
    _measured_row(args, row_before, "shape gpt-small-g0-mb0", "pipeline.preflight.job:preflight_pretrain")
    written = json.loads(row.read_text())
    assert written["status"] == "stopped"
    assert written["error"].startswith("stopped by walltime at step 7 of 20 (SIGURG)")
    [verdicted] = with_verdicts([written])
    assert verdicted["verdict"] == "stopped"
    report = tmp_path / "preflight.csv"
    report.write_text(csv_text([verdicted], COLUMNS))
    JobSizing(Grid.load(TINY), None, preflight_table=report).green().training("wt103-small-gpt")
    assert "Stopped by walltime before they measured (not red): gpt-small-g0-mb0." in markdown([verdicted], [])


def test_a_failed_stage_row_stops_the_grids_dry_run_but_not_the_preflights(tmp_path):
    """The sentence of ``test_a_red_preflight_row_stops_every_grid_job_with_its_sentence`` stops Snakemake."""
    (shape, run_id, row_file), changes, sentence = RED_ROWS["spectra failed"]
    report = write_report(tmp_path / "results" / "tiny" / "preflight.csv", shape, run_id, "cpu", **changes)
    stopped = dry_run(tmp_path, "results/tiny/analysis/spectra/owt-medium-gpt.csv")
    output = " ".join((stopped.stdout + stopped.stderr).split())
    relative = {"row": f"results/tiny/{row_file}", "report": report.relative_to(tmp_path)}
    assert stopped.returncode != 0
    assert f"{relative['report']}: {sentence.format(**relative)}" in output, output[-2000:]
    preflight = dry_run(tmp_path, "preflight")
    assert preflight.returncode == 0, preflight.stderr[-2000:]


def test_a_red_shapes_row_still_stops_its_runs_after_a_green_row_of_the_same_model_lowers_their_gpus(tmp_path):
    """Paper preset, example site: owt-medium-gpt is shape gpt-medium-g2-mb0 as sized before the preflight. A green
    row of wt103-medium-gpt (the same model, shape gpt-medium-g1-mb0) measuring it 10× faster than estimated gives
    owt-medium-gpt 1 GPU; its own red row still stops it, and the preflight's shapes stay the ones it ran."""
    from pipeline.planning.preflight_jobs import training_shapes

    paper, site = load_preset({"preset": "paper"}), load_site(EXAMPLE)
    grid = Grid.load(paper)
    estimated = MeasuredTable(grid, site.device, mfu=site.mfu).job(grid.workloads["wt103-medium-gpt"]).tokens_per_s
    shapes_before = set(training_shapes(JobSizing(Grid.load(paper), site)))
    green = report_row("gpt-medium-g1-mb0", "wt103-medium-gpt", "h100", tokens_per_s_per_device=10 * estimated)
    red = report_row(
        "gpt-medium-g2-mb0", "owt-medium-gpt", "h100", status="failed", error=OOM, tokens_per_s_per_device=""
    )
    report = tmp_path / "preflight.csv"
    report.write_text(csv_text(with_verdicts([green, red]), COLUMNS))
    jobs = JobSizing(Grid.load(paper), site, preflight_table=report)
    assert jobs.training("owt-medium-gpt").gpus == 1
    with pytest.raises(PreflightError, match="the preflight of shape gpt-medium-g2-mb0 .run owt-medium-gpt. failed"):
        jobs.green()
    assert set(training_shapes(jobs)) == shapes_before


def test_the_fit_table_plans_a_run_at_the_gpu_count_a_preflight_gives_it_and_at_the_one_before(tmp_path):
    """A green row measuring wt103-medium-gpt 10× faster than estimated gives owt-medium-gpt (the same model) 1 GPU
    instead of 2: the fit table plans it on both counts, so its job finds its row whichever sizing it reads, and the
    fit rule's digest changes, so that Snakemake plans the table again."""
    from pipeline.planning.fit import planned_jobs, plans_digest

    paper, site = load_preset({"preset": "paper"}), load_site(EXAMPLE)
    grid = Grid.load(paper)
    estimated = MeasuredTable(grid, site.device, mfu=site.mfu).job(grid.workloads["wt103-medium-gpt"]).tokens_per_s
    report = write_report(
        tmp_path / "preflight.csv",
        "gpt-medium-g1-mb0",
        "wt103-medium-gpt",
        "h100",
        tokens_per_s_per_device=10 * estimated,
    )
    before = [count for _, count, _ in planned_jobs(Grid.load(paper), None, None, site, ["owt-medium-gpt"])]
    after = [count for _, count, _ in planned_jobs(Grid.load(paper), None, None, site, ["owt-medium-gpt"], report)]
    assert before == [2] and after == [2, 1]
    digests = [
        plans_digest(Grid.load(paper), planned_jobs(Grid.load(paper), None, None, site, preflight_table=table))
        for table in (report, None, tmp_path / "absent.csv")
    ]
    assert digests[0] != digests[1] == digests[2]


def test_a_preflight_row_reads_back_typed_and_a_column_that_does_not_apply_as_none(tmp_path):
    report = write_report(
        tmp_path / "preflight.csv", "finetune-lora", "ft-owt-wt103-diffeq6-n3-lora", "h100", budget_bytes="n/a"
    )
    row = MeasuredTable(Grid.load(TINY), "h100", preflight_table=report).preflight_rows["finetune-lora"]
    assert (row.tokens_per_s_per_device, row.peak_memory_bytes, row.budget_bytes) == (100.0, 1e9, None)
    assert (row.run_id, row.device_label, row.verdict) == ("ft-owt-wt103-diffeq6-n3-lora", "h100", "ok")


MEASURED_MODEL = ("gpt", "small", 4)
"""The model of the tiny preset's ``wt103-small-gpt`` and ``owt-small-gpt`` (family, size, layers)."""


def throughput_table(path):
    """``bench throughput-sizes``' table: 50 tokens/s per GPU of ``MEASURED_MODEL`` on an H100."""
    row = dict(zip(("family", "size", "num_layers"), MEASURED_MODEL, strict=True))
    row |= {"device": "h100", "hidden_dim": 64, "seq_len": 64, "params": 1, "tokens_per_s_per_gpu": 50.0}
    path.write_text(csv_text([row], THROUGHPUT_COLUMNS))
    return path


def test_the_preflight_wins_over_the_throughput_table_and_a_model_neither_measured_is_left_to_the_estimate(tmp_path):
    throughput = throughput_table(tmp_path / "throughput.csv")
    report = write_report(tmp_path / "preflight.csv", "gpt-small-g1-mb0", "wt103-small-gpt", "h100")
    grid = Grid.load(TINY)
    both = MeasuredTable(grid, "h100", preflight_table=report, throughput_table=throughput)
    table_only = MeasuredTable(grid, "h100", throughput_table=throughput)
    small, medium = grid.workloads["owt-small-gpt"], grid.workloads["owt-medium-gpt"]
    assert both.tokens_per_s(small) == (100.0, "preflight")
    assert table_only.tokens_per_s(small) == (50.0, "measured")
    assert both.tokens_per_s(medium) is None and table_only.tokens_per_s(medium) is None
