"""The Snakemake workflow: lint-clean, and the SLURM profile's dry run of the paper preset sizes every job from the
site settings and the cost model."""

import ast
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from cli_testkit import ROOT, dry_run, example_site, snakemake_run
from cli_testkit import dry_run_jobs as parsed_dry_run

from pipeline.cli import runs_a_ray_task
from pipeline.config import load_preset, memory_probes, pretrain_runs
from pipeline.config.site import load_site
from pipeline.execution.job_env import FORWARDED_ENV, RAY_PLACEMENT_ENV
from pipeline.planning.grid import Grid
from pipeline.planning.jobs import JobSizing

SUBMIT_HOST_RULES = {
    "all",
    "prefetch",
    "prefetch_dataset",
    "prefetch_tokenizer",
    "prefetch_task",
    "clustering",
    "param_counts",
    *(
        rule
        for name in ("tables.smk", "figures.smk", "report.smk")
        for rule in re.findall(r"^rule (\w+):", (ROOT / "workflow" / "rules" / name).read_text(), re.M)
    ),
}
"""Rules that run on the submit host (``localrules``: the prefetch, which needs the network, and jobs of seconds)."""


def slurm_dry_run(
    workdir: Path, *targets: str, config: tuple[str, ...] = (), site: Path | str = "profiles/slurm/site.example.yaml"
) -> subprocess.CompletedProcess:
    """``dry_run`` of ``targets`` in ``workdir`` through ``profiles/slurm`` at ``site``, with the --config values
    ``config``."""
    return dry_run(workdir, *targets, "--profile", "profiles/slurm", "--config", f"site={site}", *config)


MISSING_SOFTWARE_LINT = "Specify a conda environment or container for each rule."
"""The one lint allowed: every rule runs in the locked virtualenv, not conda (docs/configuration.md#environment)."""


def test_snakemake_lint_is_clean_but_for_the_missing_conda_envs():
    result = snakemake_run(ROOT, "--lint")
    output = result.stdout + result.stderr
    assert "Lints for rule" in output or "Congratulations, your workflow is in a good condition!" in output, output
    assert set(re.findall(r"^ +\* (.+):$", output, re.M)) <= {MISSING_SOFTWARE_LINT}


def dry_run_jobs(output: str) -> list[dict]:
    """``cli_testkit.dry_run_jobs`` of a dry run's ``output``, each job's wildcards as a mapping."""
    return [
        {"resources": {}, **job, "wildcards": dict(item.split("=", 1) for item in job["wildcards"].split(", "))}
        if job.get("wildcards")
        else {"resources": {}, **job, "wildcards": {}}
        for job in parsed_dry_run(output, ROOT)
    ]


def test_slurm_profile_dry_run_sizes_every_paper_job_from_the_site_and_fit_table_with_the_sites_options(
    tmp_path, site_fit_table
):
    """At a site whose results go to its ``results_dir``, where ``results/paper/fit.csv`` planned every training job on
    its GPUs (owt-small-gpt at micro-batch 16 on its 1 GPU): each job trains at its row's micro-batch; lm-eval runs
    once per run of the pairs, on every task and shot count of the preset; qos on every job, each partition's
    constraint, the reservation, a training job's early SIGTERM and each kind's extras as slurm_extra; every output
    under results_dir (where the fit table is read too)."""
    scratch = tmp_path / "scratch"
    site = example_site(
        tmp_path / "site.yaml",
        qos="long",
        gpu_constraint="h100",
        cpu_constraint="icelake",
        reservation="paper",
        slurm_extra={"training": "--exclusive", "gpu": None, "cpu": "--nice=10"},
        signal_lead_s=900,
        results_dir=str(scratch / "results"),
    )
    table = site_fit_table(scratch, {"owt-small-gpt": 16}, site)
    result = slurm_dry_run(tmp_path / "work", "all", site=site)
    assert result.returncode == 0, result.stderr[-2000:]
    config = load_preset({"preset": "paper"})
    grid = Grid.load(config)
    sizing = JobSizing(grid, load_site(site), table)
    jobs = dry_run_jobs(result.stdout)
    pretrain = {job["wildcards"]["run"]: job for job in jobs if job["rule"] == "pretrain"}
    assert set(pretrain) == set(pretrain_runs(config))
    finetunes = {job["wildcards"]["finetune"]: job for job in jobs if job["rule"] == "finetune"}
    assert set(finetunes) == set(grid.finetunes)
    probes = [job for job in jobs if job["rule"] == "memory_probe"]
    assert len(probes) == len(memory_probes(config)) == 7
    for runs in (pretrain, finetunes):
        for run_id, job in runs.items():
            shape = sizing.training(run_id)
            expected = {
                "slurm_partition": shape.placement.partition,
                "gpu": shape.gpus,
                "cpus_per_task": shape.cpus,
                "mem_mb": shape.mem_mb,
                "runtime": shape.minutes,
                "micro_batch": shape.micro_batch,
            }
            assert {key: job["resources"][key] for key in expected} == {k: str(v) for k, v in expected.items()}, run_id
            assert f"--gpus {shape.gpus} --micro-batch {shape.micro_batch}" in job["shell"], run_id
    gpus = {run_id: int(job["resources"]["gpu"]) for run_id, job in pretrain.items()}
    assert gpus["owt-llama1b-diffeq_llama"] == 8 and gpus["wt103-small-gpt"] == 1, gpus
    assert "--gpus 1 --micro-batch 16 " in pretrain["owt-small-gpt"]["shell"]
    downstream = [job["shell"] for job in jobs if job["rule"] == "downstream"]
    pairs = config["downstream"]["pairs"].values()
    assert sorted(re.search(r"--run-dir \S+/results/paper/runs/(\S+)", line)[1] for line in downstream) == sorted(
        run_id for pair in pairs for run_id in pair
    )
    assert all(f"--tasks {' '.join(config['downstream']['tasks'])} --shots 0 5 " in line for line in downstream)
    assert not any("--task-dir" in line or "--limit" in line for line in downstream)
    extras = {
        "training": "--reservation=paper --exclusive --signal=URG@900",
        "gpu": "--reservation=paper",
        "cpu": "--reservation=paper --nice=10",
        "data": "--reservation=paper --nice=10 --signal=URG@900",
    }
    for job in jobs:
        resources = job["resources"]
        if job["rule"] in SUBMIT_HOST_RULES:
            assert "slurm_partition" not in resources, job
            continue
        assert resources["nodes"] == "1" and int(resources["runtime"]) <= 2880, job
        expected_partition = "gpu" if int(resources["gpu"]) else "cpu"
        assert resources["slurm_partition"] == expected_partition, job
        assert job["rule"] in {"data_rate", "corpus", "tokenizer", "token_cache", "fit"} or int(resources["gpu"]), job
        kind = (
            "training"
            if job["rule"] in {"pretrain", "finetune"}
            else "data"
            if job["rule"] in {"corpus", "token_cache"}
            else "gpu"
            if resources["slurm_partition"] == "gpu"
            else "cpu"
        )
        assert resources["qos"] == "long" and resources["slurm_extra"] == extras[kind], job
        assert resources["constraint"] == ("icelake" if kind in ("cpu", "data") else "h100"), job
    assert {job["rule"] for job in jobs} >= {"corpus", "token_cache"}
    outputs = re.findall(r"^    output: (.*)$", result.stdout, re.M)
    assert outputs and all(
        path.startswith(str(scratch / "results" / "paper")) for line in outputs for path in line.split(", ")
    ), outputs[:3]


ENVIRONMENT_AT_EXIT = (
    "import atexit, json, os, runpy, sys; before = dict(os.environ); "
    "atexit.register(lambda: print('changed:', json.dumps(sorted("
    "name for name in {*before, *os.environ} if before.get(name) != os.environ.get(name))))); "
    "sys.argv = ['snakemake', *sys.argv[1:]]; runpy.run_module('snakemake', run_name='__main__')"
)
"""Snakemake in a process that prints, as it exits, the names of the environment variables changed in it."""
JOB_ENVIRONMENT = {*FORWARDED_ENV, *RAY_PLACEMENT_ENV.values(), "PYTHONPATH", "HF_ENDPOINT"}
"""What the workflow sets for its jobs (pipeline/execution/job_env.py); the libraries it imports set others."""


@pytest.mark.slow
def test_jobs_get_the_presets_and_sites_environment_which_reading_the_workflow_leaves_alone(tmp_path):
    """A dry run (reading the workflow, planning the DAG) changes no environment variable; a job of the tiny preset at
    the example site then runs with the variables that preset and site set (pipeline/execution/job_env.py): here its
    ``python`` writes its environment and stops, so the job fails on its missing output."""
    workflow = ["--snakefile", str(ROOT / "workflow" / "Snakefile"), "--directory", str(tmp_path / "work")]
    config = ["--config", "preset=tiny", "site=profiles/slurm/site.example.yaml"]
    target = "results/tiny/data/corpora/wt103"
    without = {name: "" for name in ("PIPELINE_TRACKERS", "PIPELINE_WANDB", "HF_HOME", "HF_HUB_OFFLINE")}
    dry_run = subprocess.run(
        [sys.executable, "-c", ENVIRONMENT_AT_EXIT, target, "-n", *workflow, *config],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **without},
        timeout=300,
    )
    assert dry_run.returncode == 0, dry_run.stderr[-2000:]
    [changed] = re.findall(r"^changed: (.*)$", dry_run.stdout, re.M)
    assert not set(json.loads(changed)) & JOB_ENVIRONMENT, changed
    shim = tmp_path / "bin" / "python"
    shim.parent.mkdir()
    shim.write_text(f"#!/bin/sh\nenv -0 > {tmp_path / 'job.env'}\n")
    shim.chmod(0o755)
    path = f"{shim.parent}{os.pathsep}{os.environ['PATH']}"
    snakemake_run(tmp_path / "work", target, "--cores", "1", *config, env={**without, "PATH": path})
    job_env = dict(item.split("=", 1) for item in (tmp_path / "job.env").read_text().split("\0") if item)
    assert job_env["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT)
    assert job_env["XLA_FLAGS"].startswith("--xla_backend_optimization_level=1")
    assert (job_env["PIPELINE_TRACKERS"], json.loads(job_env["PIPELINE_WANDB"])["project"]) == ("jsonl", "diffeqformer")
    assert job_env["HF_HOME"] == str(Path("~/.cache/huggingface").expanduser())
    assert job_env["HF_HUB_OFFLINE"] == job_env["HF_DATASETS_OFFLINE"] == "1"


def test_a_missing_site_file_or_a_bad_override_stops_snakemake_with_its_one_sentence(tmp_path):
    """The site file's sentence says to copy the example; the preset's names its key (each of its sentences:
    tests/test_config.py)."""
    preset = ROOT / "pipeline" / "config" / "presets" / "tiny.yaml"
    for config, sentence in (
        (f"site={tmp_path / 'site.yaml'}", f"site settings {tmp_path / 'site.yaml'} do not exist; copy"),
        ("downstream={tasks: [a;b]}", f"{preset} (with --config overrides ['downstream']): key 'downstream.tasks.0'"),
    ):
        result = snakemake_run(ROOT, "-n", "--config", config)
        assert result.returncode != 0 and sentence in result.stdout + result.stderr, config


def shell_commands(rules: Path) -> dict[str, str]:
    """Every rule's ``shell:`` string (adjacent string literals joined), by rule name."""
    text = rules.read_text()
    rule = r"^(?:rule|checkpoint) "
    blocks = re.findall(rf"{rule}(\w+):.*\n(?:(?!{rule}).*\n)*?    shell:\n((?:        .*\n?)+)", text, re.M)
    return {name: "".join(ast.literal_eval(line.strip()) for line in block.splitlines()) for name, block in blocks}


def test_every_value_reaching_a_shell_is_quoted():
    """Params, wildcards, inputs, outputs, logs and resources enter a shell command through ``:q`` only (a list is
    quoted element by element), so no config string can run as shell code."""
    rule_files = sorted((ROOT / "workflow" / "rules").glob("*.smk"))
    commands = {f"{path.name}:{name}": command for path in rule_files for name, command in shell_commands(path).items()}
    assert len(commands) == sum(path.read_text().count("\n    shell:\n") for path in rule_files)
    unquoted = {
        where: fields
        for where, command in commands.items()
        if (fields := [f for f in re.findall(r"(?<!{){([^{}]+)}(?!})", command) if not f.endswith(":q")])
    }
    assert not unquoted


def test_a_local_run_starts_its_shared_ray_for_the_rules_whose_verb_runs_a_ray_task():
    """common.smk's onstart asks each job's shell command (``runs_a_ray_task``): the training, lm-eval, GPU analysis,
    memory probe and preflight rules, not the token cache (whose verb only joins a Ray it is given)."""
    commands = {
        name: command
        for path in (ROOT / "workflow" / "rules").glob("*.smk")
        for name, command in shell_commands(path).items()
    }
    assert {name for name, command in commands.items() if runs_a_ray_task(command)} == {
        "pretrain",
        "finetune",
        "downstream",
        "spectra",
        "lyapunov",
        "frontier",
        "memory_probe",
        "preflight_job",
        "preflight_stage",
    }


def test_the_tiny_preset_on_the_slurm_profile_asks_for_tiny_cpu_jobs(tmp_path):
    result = slurm_dry_run(tmp_path, "results/tiny/data/caches/wt103-bpe", config=("preset=tiny",))
    assert result.returncode == 0, result.stderr[-2000:]
    jobs = dry_run_jobs(result.stdout)
    assert {job["rule"] for job in jobs} == {"corpus", "tokenizer", "token_cache"}
    for job in jobs:  # the tokenizer: a ceiling of an hour; the data jobs: seconds measured, + chunk_startup_min
        assert {key: job["resources"][key] for key in ("cpus_per_task", "mem_mb", "runtime")} == {
            "cpus_per_task": "2",
            "mem_mb": "8000",
            "runtime": "60" if job["rule"] == "tokenizer" else "31",
        }, job


def plans_without_xla(requests: list, gpus: int, stop) -> list[dict]:
    """``fit.plans_in_subprocess`` without XLA: a plan of one parameter whose temporary bytes are its micro-batch."""
    one = {"parameters": 1, "trainable_parameters": 1, "param_bytes": 1, "replicated_param_bytes": 0}
    return [{**one, "optimizer_bytes": 0, "temp_bytes": mb, "total_bytes": 1 + mb} for *_, mb in requests]


@pytest.mark.parametrize("ablation", [False, True])
def test_fit_plans_the_rows_of_the_config_the_dry_run_resolved(tmp_path, monkeypatch, ablation):
    """The ``fit`` job gets the preset file and the --config overrides of the dry run (here a copy of the tiny
    preset, and with it a pretraining group added on the command line): the table it writes (XLA's plans replaced
    by a fake, linear in the micro-batch) has a row for every job the dry run then sizes."""
    from pipeline.cli import main
    from pipeline.planning import fit

    preset = tmp_path / "my_tiny.yaml"
    preset.write_text(
        (ROOT / "pipeline" / "config" / "presets" / "tiny.yaml").read_text().replace("preset: tiny", "preset: my_tiny")
    )
    overrides = (
        [
            "pretrain={wt103-extra: {dataset: wt103, size: small, tokenizer: bpe, families: [gpt], "
            "train: {batch_size: 8, steps: 4, lr: 0.006, eval_every: 2}}}"
        ]
        if ablation
        else []
    )
    config = (f"preset={preset}", *overrides)
    planned = slurm_dry_run(tmp_path, "fit", config=config)
    assert planned.returncode == 0, planned.stderr[-2000:]
    [fit_job] = [job for job in dry_run_jobs(planned.stdout) if job["rule"] == "fit"]
    command = fit_job["shell"]
    assert "--site profiles/slurm/site.example.yaml" in command and fit_job["resources"]["slurm_partition"] == "cpu"
    monkeypatch.setattr(fit, "plans_in_subprocess", plans_without_xla)
    monkeypatch.chdir(tmp_path)
    words = shlex.split(command.split(">")[0])
    assert main(words[words.index("pipeline") + 1 :]) == 0
    result = slurm_dry_run(tmp_path, "all", config=config)
    assert result.returncode == 0, result.stderr[-2000:]
    pretrain = {job["wildcards"]["run"] for job in dry_run_jobs(result.stdout) if job["rule"] == "pretrain"}
    assert ("wt103-extra-gpt" in pretrain) == ablation


def test_every_verb_that_loads_the_preset_gets_the_preset_file_and_overrides_as_given(tmp_path):
    """A preset given as a file (its own name, ``my_tiny``) and a --config override: each job whose verb loads the
    preset itself (``--preset``: the grid's status, the scorecard, the preflight report) gets that file and the
    override, not the preset's name, which names no built-in preset, nor the preset without the override."""
    preset = tmp_path / "my_tiny.yaml"
    preset.write_text(
        (ROOT / "pipeline" / "config" / "presets" / "tiny.yaml").read_text().replace("preset: tiny", "preset: my_tiny")
    )
    result = dry_run(tmp_path, "all", "preflight", "--config", f"preset={preset}", "downstream={limit: 50}")
    assert result.returncode == 0, result.stderr[-2000:]
    given = {}
    for job in dry_run_jobs(result.stdout):
        words = shlex.split(job.get("shell", "").replace("<workdir>", str(tmp_path)))
        if "--preset" in words:
            overrides = json.loads(words[words.index("--overrides") + 1]) if "--overrides" in words else {}
            given[job["rule"]] = load_preset({"preset": words[words.index("--preset") + 1], **overrides})
    assert set(given) == {"status", "scorecard", "preflight"}, given
    resolved = load_preset({"preset": str(preset), "downstream": {"limit": 50}})
    for rule, config in given.items():
        assert config == resolved, rule


def test_the_fit_cli_without_a_site_leaves_the_site_planned_table_alone(tmp_path, monkeypatch):
    from pipeline.cli import main
    from pipeline.config import site
    from pipeline.planning import fit

    monkeypatch.setattr(site, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(fit, "plans_in_subprocess", plans_without_xla)
    table = tmp_path / "results" / "tiny" / "fit.csv"
    table.parent.mkdir(parents=True)
    table.write_text("site-planned\n")
    assert main(["fit", "--preset", "tiny", "--device", "h100", "--gpus", "1", "--runs", "wt103-small-gpt"]) == 0
    assert table.read_text() == "site-planned\n"
    assert (tmp_path / "results" / "tiny" / "fit-h100x1.csv").read_text().count("wt103-small-gpt") == 1


def test_the_report_shows_the_grids_status_as_one_more_captioned_item(tmp_path):
    """`snakemake` (rule all) runs `python -m pipeline status` once every training run is done, into a file marked
    for `snakemake --report` under Status with its caption (workflow/report/status.rst)."""
    result = dry_run(tmp_path, "--config", "preset=tiny")
    assert result.returncode == 0, result.stderr[-2000:]
    [status] = [job for job in dry_run_jobs(result.stdout) if job["rule"] == "status"]
    assert re.search(
        r"python -m pipeline status --preset tiny --overrides '?\{\}'? --results results/tiny +> "
        r"results/tiny/status.txt",
        status["shell"],
    ), status
    rules = (ROOT / "workflow" / "rules" / "report.smk").read_text()
    assert re.search(
        r'report\(\s*f"\{RESULTS\}/status.txt",\s*caption="../report/status.rst",\s*category="Status"', rules
    )
    assert "pipeline status" in (ROOT / "workflow" / "report" / "status.rst").read_text()
