"""What the grid reads back from a preflight report (pipeline/planning/measured.py): measured throughput in the
cost preview and the training walltimes (a pretraining shape's; a fine-tune method's), and the stop of a red row (a
training shape's; a stage job's) in the grid's dry run."""

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
from pipeline.planning.grid import Grid, model_cost
from pipeline.planning.jobs import JobSizing
from pipeline.planning.measured import PreflightError, read_preflight_rows
from pipeline.planning.placement import JobRequest
from pipeline.preflight.report import COLUMNS, markdown, with_verdicts

TINY = load_preset({"preset": "tiny"})
TINY_RUNS = pretrain_runs(TINY)


def write_report(path: Path, shape: str, run_id: str, device: str, **changes) -> Path:
    """A preflight report with one row, green unless ``changes`` make it red."""
    row = {
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
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(csv_text(with_verdicts([row]), COLUMNS))
    return path


def test_a_preflight_row_with_half_the_throughput_doubles_the_walltime_and_the_cost(tmp_path, capsys):
    site = load_site(EXAMPLE)
    report = tmp_path / "preflight.csv"
    minutes, hours = [], []
    for tokens_per_s in (2.0, 1.0):
        write_report(report, "gpt-small-g1-mb0", "wt103-small-gpt", "h100", tokens_per_s_per_device=tokens_per_s)
        job = JobSizing(Grid.load(TINY), site, preflight_table=report).training("wt103-small-gpt")
        assert job.gpus == 1
        minutes.append(job.minutes - DEFAULT_CHUNK_STARTUP_MIN)
        _, runs = preview(Grid.load(load_preset({"preset": "tiny"})), "h100", preflight=report)
        [row] = [row for row in runs if row["run_id"] == "wt103-small-gpt"]
        assert row["source"] == "preflight"
        hours.append(row["gpu_hours"])
    assert abs(minutes[1] - 2 * minutes[0]) <= 1, minutes
    assert hours[1] == pytest.approx(2 * hours[0])
    assert main(["cost", "--preset", "tiny", "--device", "h100", "--preflight", str(report)]) == 0
    assert f"measured by the preflight: training tokens/s per GPU from {report}" in capsys.readouterr().out


def test_a_preflight_row_of_another_device_is_not_read(tmp_path):
    report = write_report(tmp_path / "preflight.csv", "gpt-small-g1-mb0", "wt103-small-gpt", "cpu")
    _, runs = preview(Grid.load(load_preset({"preset": "tiny"})), "h100", preflight=report)
    assert {row["source"] for row in runs} == {"estimate"}


def test_a_preflight_row_of_a_job_the_preset_no_longer_has_is_not_read(tmp_path):
    """A report of an earlier version of the preset (a run since renamed) leaves the estimates, and the preflight's
    own jobs, sizable: the preflight can be rerun."""
    report = write_report(tmp_path / "preflight.csv", "gpt-small-g1-mb0", "wt103-renamed-gpt", "h100")
    _, runs = preview(Grid.load(load_preset({"preset": "tiny"})), "h100", preflight=report)
    assert {row["source"] for row in runs} == {"estimate"}
    assert JobSizing(Grid.load(TINY), load_site(EXAMPLE), preflight_table=report).training("wt103-small-gpt").gpus == 1


RED_ROWS = {
    "failed": (
        {"status": "failed", "error": "the job ran out of accelerator memory"},
        "preflight.csv: the preflight of shape gpt-small-g0-mb0 (run {run}) failed (the job ran out "
        "of accelerator memory); fix that, delete ",
    ),
    "over plan": (
        {"peak_memory_bytes": 3 * 10**9},
        "preflight.csv: the preflight of shape gpt-small-g0-mb0 (run {run}) peaked at 3 GB, over "
        "its plan's 2 GB; set a smaller micro-batch",
    ),
}


@pytest.mark.parametrize("red", sorted(RED_ROWS))
def test_a_red_preflight_row_stops_every_grid_job_with_its_sentence(tmp_path, red):
    """The grid starts on a green preflight only: a red row stops its own run and every other job, naming the row."""
    changes, sentence = RED_ROWS[red]
    report = write_report(
        tmp_path / "results" / "tiny" / "preflight.csv", "gpt-small-g0-mb0", "wt103-small-gpt", "cpu", **changes
    )
    expected = sentence.format(run="wt103-small-gpt").replace("(", r"\(").replace(")", r"\)")
    jobs = JobSizing(Grid.load(TINY), None, preflight_table=report)
    with pytest.raises(ValueError, match=expected):
        jobs.green()  # what every grid job's resources ask first (workflow/rules/resources.smk)
    assert jobs.training("wt103-medium-gpt") == JobRequest(micro_batch=0)


@pytest.mark.slow
def test_a_preflight_job_whose_verb_fails_writes_its_sentence_and_its_row_stops_the_run(tmp_path):
    """A job given a GPU that its Ray cluster lacks fails; its row says so, and the report's red row stops the run."""
    row = tmp_path / "row.json"
    spec = TINY_RUNS["wt103-small-gpt"].to_json()
    assert (
        main(
            [
                "preflight-job",
                "--spec",
                spec,
                "--shape",
                "gpt-small-g0-mb0",
                "--runs",
                "2",
                "--job-dir",
                str(tmp_path / "job"),
                "--cache",
                str(tmp_path / "cache"),
                "--tokenizer",
                str(tmp_path / "tok"),
                "--micro-batch",
                "0",
                "--device-label",
                "cpu",
                "--gpus",
                "1",
                "--ray-num-cpus",
                "1",
                "--row",
                str(row),
            ]
        )
        == 0
    )
    failed = json.loads(row.read_text())
    assert failed["status"] == "failed" and "asks for 1 GPU(s) but the Ray cluster" in failed["error"], failed
    report = tmp_path / "preflight.csv"
    report.write_text(csv_text(with_verdicts([failed]), COLUMNS))
    with pytest.raises(
        ValueError,
        match=r"the preflight of shape gpt-small-g0-mb0 \(run wt103-small-gpt\) failed "
        r"\(.*asks for 1 GPU\(s\)",
    ):
        JobSizing(Grid.load(TINY), None, preflight_table=report).green().training("wt103-small-gpt")


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


LORA_MEASURED, LORA_OTHER = "ft-wt103-owt-diffeq6-n3-lora", "ft-wt103-owt-diffeq6-n6-lora"
"""The tiny preset's first LoRA fine-tune (what its preflight stage job ``finetune-lora`` trains) and another LoRA
fine-tune, to N' = 6 steps rather than 3 (more FLOPs per token)."""


def test_a_preflight_finetune_row_with_half_the_throughput_doubles_its_methods_walltimes_and_cost(tmp_path, capsys):
    """The row's measured FLOP rate carries to every fine-tune of its method at that fine-tune's own FLOPs per token;
    fine-tunes of the other method stay estimates."""
    site = load_site(EXAMPLE)
    report = tmp_path / "preflight.csv"
    workloads = Grid.load(TINY).workloads
    flops = {run: model_cost(workloads[run], TINY)[1] for run in (LORA_MEASURED, LORA_OTHER)}
    minutes, hours = [], []
    for tokens_per_s in (2.0, 1.0):
        write_report(
            report, "finetune-lora", LORA_MEASURED, "h100", kind="finetune-lora", tokens_per_s_per_device=tokens_per_s
        )
        job = JobSizing(Grid.load(TINY), site, preflight_table=report).training(LORA_OTHER)
        assert job.gpus == 1
        minutes.append(job.minutes - DEFAULT_CHUNK_STARTUP_MIN)
        _, runs = preview(Grid.load(load_preset({"preset": "tiny"})), "h100", preflight=report)
        rows = {row["run_id"]: row for row in runs}
        full = rows["ft-wt103-owt-diffeq6-n3-full"]
        assert rows[LORA_OTHER]["source"] == "preflight" and full["source"] == "estimate"
        assert rows[LORA_OTHER]["tokens_per_s_per_gpu"] == pytest.approx(
            tokens_per_s * flops[LORA_MEASURED] / flops[LORA_OTHER]
        )
        hours.append(rows[LORA_OTHER]["gpu_hours"])
    assert abs(minutes[1] - 2 * minutes[0]) <= 1, minutes
    assert hours[1] == pytest.approx(2 * hours[0])
    assert main(["cost", "--preset", "tiny", "--device", "h100", "--preflight", str(report)]) == 0
    assert "(a fine-tune: the MFU measured for its method" in capsys.readouterr().out


STAGE_ROWS = {
    "finetune-lora": "ft-wt103-owt-diffeq6-n3-lora",
    "finetune-full": "ft-wt103-owt-diffeq6-n3-full",
    "downstream": "owt-large-gpt",
    "spectra": "owt-medium-diffeq",
    "lyapunov": "owt-medium-diffeq",
    "frontier": "owt-medium-diffeq",
}
"""Per stage job of the tiny preset: the grid job it ran as."""


@pytest.mark.parametrize("kind", sorted(STAGE_ROWS))
def test_a_failed_stage_row_stops_every_grid_job_naming_itself(tmp_path, kind):
    measured = STAGE_ROWS[kind]
    report = write_report(
        tmp_path / "preflight.csv",
        kind,
        measured,
        "cpu",
        kind=kind,
        status="failed",
        error="the job ran out of accelerator memory",
    )
    sizing = JobSizing(Grid.load(TINY), None, preflight_table=report)
    sentence = (
        f"{report}: the preflight of stage job {kind} ({kind} of run {measured}) failed (the job ran out of "
        f"accelerator memory); fix that, delete {tmp_path}/preflight/stages/{kind}/row.json and {report}, and run "
        "the command again: it reruns that job before the grid."
    )
    with pytest.raises(PreflightError) as error:
        sizing.green()
    assert str(error.value) == sentence


def test_a_failed_stage_row_stops_the_grids_dry_run_but_not_the_preflights(tmp_path):
    write_report(
        tmp_path / "results" / "tiny" / "preflight.csv",
        "spectra",
        "owt-medium-diffeq",
        "cpu",
        kind="spectra",
        status="failed",
        error="the job ran out of accelerator memory",
    )

    stopped = dry_run(tmp_path, "results/tiny/analysis/spectra/owt-medium-gpt.csv")
    output = " ".join((stopped.stdout + stopped.stderr).split())
    assert stopped.returncode != 0
    assert (
        "results/tiny/preflight.csv: the preflight of stage job spectra (spectra of run owt-medium-diffeq) failed "
        "(the job ran out of accelerator memory); fix that, delete results/tiny/preflight/stages/spectra/row.json "
        "and results/tiny/preflight.csv, and run the command again: it reruns that job before the grid."
    ) in output, output[-2000:]
    preflight = dry_run(tmp_path, "preflight")
    assert preflight.returncode == 0, preflight.stderr[-2000:]


def test_a_red_shapes_row_still_stops_its_runs_after_a_green_row_of_the_same_model_lowers_their_gpus(tmp_path):
    """Paper preset, example site: owt-medium-gpt is shape gpt-medium-g2-mb0 as sized before the preflight. A green
    row of wt103-medium-gpt (the same model, shape gpt-medium-g1-mb0) measuring it 10× faster than estimated gives
    owt-medium-gpt 1 GPU; its own red row still stops it, and the preflight's shapes stay the ones it ran."""
    from pipeline.planning.preflight_jobs import training_shapes

    paper, site = load_preset({"preset": "paper"}), load_site(EXAMPLE)
    estimated = JobSizing(Grid.load(paper), site).cost("wt103-medium-gpt")["tokens_per_s_per_gpu"]
    shapes_before = set(training_shapes(JobSizing(Grid.load(paper), site)))
    common = {"runs": 1, "device_label": "h100", "peak_memory_bytes": 10**9, "budget_bytes": 2 * 10**9}
    rows = [
        {
            "shape": "gpt-medium-g1-mb0",
            "run_id": "wt103-medium-gpt",
            "status": "ok",
            "error": "",
            "tokens_per_s_per_device": 10 * estimated,
            **common,
        },
        {
            "shape": "gpt-medium-g2-mb0",
            "run_id": "owt-medium-gpt",
            "status": "failed",
            "error": "the job ran out of accelerator memory",
            "tokens_per_s_per_device": "",
            **common,
        },
    ]
    report = tmp_path / "preflight.csv"
    report.write_text(csv_text(with_verdicts(rows), COLUMNS))
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
    estimated = JobSizing(Grid.load(paper), site).cost("wt103-medium-gpt")["tokens_per_s_per_gpu"]
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
    assert plans_digest(Grid.load(paper), None, None, site, report) != plans_digest(Grid.load(paper), None, None, site)
    assert plans_digest(Grid.load(paper), None, None, site, tmp_path / "absent.csv") == plans_digest(
        Grid.load(paper), None, None, site
    )


def test_a_preflight_row_reads_back_typed_and_a_column_that_does_not_apply_as_none(tmp_path):
    report = write_report(
        tmp_path / "preflight.csv", "finetune-lora", "ft-owt-wt103-diffeq6-n3-lora", "h100", budget_bytes="n/a"
    )
    row = read_preflight_rows(report)["finetune-lora"]
    assert (row.tokens_per_s_per_device, row.peak_memory_bytes, row.budget_bytes) == (100.0, 1e9, None)
    assert (row.run_id, row.device_label, row.verdict) == ("ft-owt-wt103-diffeq6-n3-lora", "h100", "ok")
