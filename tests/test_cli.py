"""`python -m pipeline` is the one way in: no module of the package runs as a script of its own, and every command
the documentation gives names a verb that `--help` lists."""

import dataclasses
import os
import re

from cli_testkit import ROOT, pipeline_verb, python_run, tiny_spec

SUBPROCESS_WORKERS = {"pipeline/planning/xla_plans.py"}
"""Modules a verb starts as a child process (``fit``: one XLA plan per process), not commands for a person."""
DOCUMENTS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "pipeline").rglob("*.py")),
    *sorted((ROOT / "pipeline").rglob("*.md")),
    *sorted((ROOT / "workflow").rglob("*.smk")),
    ROOT / "workflow" / "Snakefile",
]
COMMAND = re.compile(r"python -m pipeline(\.[\w.]+)?(?: ([a-z][\w-]*))?(?: ([a-z][\w-]*))?")


def listed_choices(*args: str) -> set[str]:
    """The subcommands ``python -m pipeline <args> --help`` lists."""
    result = pipeline_verb(*args, "--help", timeout=60)
    assert result.returncode == 0, result.stderr
    return set(re.search(r"\{([\w,-]+)\}", result.stdout).group(1).split(","))


def test_no_module_but_the_cli_runs_as_a_script():
    scripts = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "pipeline").rglob("*.py")
        if path.name != "__main__.py" and 'if __name__ == "__main__"' in path.read_text()
    }
    assert scripts <= SUBPROCESS_WORKERS, f"not verbs of `python -m pipeline`: {sorted(scripts - SUBPROCESS_WORKERS)}"


def test_every_documented_command_is_a_verb_listed_by_help():
    verbs, benchmarks = listed_choices(), listed_choices("bench")
    assert {"cost", "fit", "bench", "build-corpora", "build-tasks"} <= verbs
    assert {"throughput", "throughput-sizes", "jacobian", "dag"} <= benchmarks
    unlisted = []
    for path in DOCUMENTS:
        for module, verb, benchmark in COMMAND.findall(path.read_text()):
            where = f"{path.relative_to(ROOT)}: python -m pipeline{module} {verb} {benchmark}".rstrip()
            if module:
                if f"pipeline/{module[1:].replace('.', '/')}.py" not in SUBPROCESS_WORKERS:
                    unlisted.append(where)
            elif verb and (verb not in verbs or (verb == "bench" and benchmark and benchmark not in benchmarks)):
                unlisted.append(where)
    assert not unlisted, unlisted


DRIVER_PROBE = r"""
import json, sys
from pathlib import Path
import pipeline.execution.runner
from pipeline.cli import main
from pipeline.config import finetune_runs, load_preset, pretrain_runs

submitted = []
pipeline.execution.runner.run_on_ray = lambda target, *args, **kwargs: submitted.append(target) or {}
preset = load_preset({"preset": "tiny"})
runs = pretrain_runs(preset)
spec, finetune = runs["wt103-ft18-diffeq"], finetune_runs(preset, runs)["ft-wt103-owt-diffeq6-n3-lora"]
source = Path(sys.argv[1])
(source / "checkpoints" / "step-2").mkdir(parents=True)
(source / "checkpoints" / "step-2" / "metadata.json").write_text("{}")
(source / "summary.json").write_text(json.dumps({"fingerprint": "f" * 64}))
(source / "config.yaml").write_text(spec.to_json())
common = ["--run-dir", str(source), "--tokenizer", "tok"]
verbs = [["pretrain", "--spec", spec.to_json(), "--run-dir", "run", "--cache", "c", "--tokenizer", "tok"],
         ["finetune", "--spec", finetune.to_json(), "--run-dir", "ft", "--source", str(source), "--cache", "c",
          "--tokenizer", "tok"],
         ["downstream", *common, "--out-dir", "d", "--pair", "p", "--tasks", "lambada_openai", "--shots", "0"],
         ["spectra", *common, "--time-oversampling", "2", "--out", "s.csv", "--untrained-out", "u.csv"],
         ["lyapunov", *common, "--sentences", '["a b"]', "--output-token", "1", "--out", "l.csv", "--html", "l.html"],
         ["frontier", *common, "--cache", "c", "--step-factors", "[1]", "--solvers", '["euler"]', "--out", "f.csv"],
         ["memory-probe", "--spec", spec.to_json(), "--tokenizer", "tok", "--steps", "1", "--out", "m.json"]]
codes = [main(argv) for argv in verbs]
heavy = sorted(name for name in ("jax", "levanter", "haliax", "equinox", "torch", "lm_eval") if name in sys.modules)
print(json.dumps({"codes": codes, "submitted": submitted, "heavy": heavy}))
"""


def test_a_jobs_driver_submits_its_work_by_name_and_imports_no_jax(tmp_path):
    """A Ray verb's driver (the Snakemake job's own process) checks its inputs and submits ``"module:function"``:
    JAX, Levanter, torch and lm-eval are imported only in the Ray worker, which resolves each name to its function."""
    from pipeline.execution.warm_workers import task_function

    result = python_run("-c", DRIVER_PROBE, str(tmp_path / "source"), cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    probe = __import__("json").loads(result.stdout.strip().splitlines()[-1])
    assert probe["codes"] == [0] * 7, result.stderr[-3000:]
    assert probe["heavy"] == []
    assert [name.rpartition(":")[2] for name in probe["submitted"]] == [
        "pretrain",
        "finetune",
        "evaluate_downstream",
        "run_spectra",
        "run_lyapunov",
        "run_frontier",
        "probe_memory",
    ]
    assert all(callable(task_function(name)) for name in probe["submitted"])


def test_a_training_verbs_micro_batch_reaches_the_spec_its_task_trains(monkeypatch, tmp_path):
    """``--micro-batch N`` (the fit table's choice, a resource of the job) sets ``train.micro_batch_size`` of the
    spec the Ray task trains (and writes to the run's config.yaml); 0 is the whole batch; the batch is unchanged."""
    monkeypatch.chdir(tmp_path)  # the verb records its attempt in the run folder
    import pipeline.execution.runner
    from pipeline.cli import main
    from pipeline.config import FinetuneSpec, RunSpec, finetune_runs, load_preset, pretrain_runs
    from pipeline.train.commands import with_micro_batch

    submitted = []
    monkeypatch.setattr(
        pipeline.execution.runner, "run_on_ray", lambda target, spec, *args, **kwargs: submitted.append(spec) or {}
    )
    preset = load_preset({"preset": "paper"})
    runs = pretrain_runs(preset)
    spec = runs["owt-small-gpt"]
    common = ["--run-dir", "run", "--cache", "c", "--tokenizer", "tok"]
    for micro_batch in ("16", "0"):
        assert main(["pretrain", "--spec", spec.to_json(), *common, "--micro-batch", micro_batch]) == 0
    assert [RunSpec.from_json(raw).train for raw in submitted] == [
        dataclasses.replace(spec.train, micro_batch_size=16),
        dataclasses.replace(spec.train, micro_batch_size=None),
    ]
    finetune = finetune_runs(preset, runs)["ft-wt103-owt-diffeq18-n9-lora"]
    assert FinetuneSpec.from_json(with_micro_batch(finetune.to_json(), 8)).train == dataclasses.replace(
        finetune.train, micro_batch_size=8
    )


def test_the_presets_warm_workers_false_gives_every_task_a_fresh_process_and_a_memory_probe_always_gets_one(
    monkeypatch, tmp_path
):
    """``ray.warm_workers`` (default true) reaches a job as ``PIPELINE_RAY_FRESH_PROCESS``, and its verb asks
    ``run_on_ray`` for a fresh Ray worker when it is false; a memory probe, which measures its own process, always
    asks for one."""
    monkeypatch.chdir(tmp_path)  # the verb records its attempt in the run folder
    import pipeline.execution.runner
    from pipeline.cli import main
    from pipeline.execution.job_env import RAY_FRESH_PROCESS_ENV, RAY_PLACEMENT_ENV, export_ray_placement

    submitted = []
    monkeypatch.setattr(
        pipeline.execution.runner,
        "run_on_ray",
        lambda target, *args, **kwargs: submitted.append((target.rpartition(":")[2], kwargs["fresh_process"])) or {},
    )
    for name in (*RAY_PLACEMENT_ENV.values(), RAY_FRESH_PROCESS_ENV):
        monkeypatch.setenv(name, "")
    spec = tiny_spec().to_json()
    for ray in ({"address": "auto", "num_cpus": None}, {"address": "auto", "num_cpus": None, "warm_workers": False}):
        export_ray_placement(ray)
        assert main(["pretrain", "--spec", spec, "--run-dir", "run", "--cache", "c", "--tokenizer", "tok"]) == 0
        assert main(["memory-probe", "--spec", spec, "--tokenizer", "tok", "--steps", "1", "--out", "m.json"]) == 0
    assert submitted == [("pretrain", False), ("probe_memory", True), ("pretrain", True), ("probe_memory", True)]


def test_only_the_lm_eval_verbs_run_with_torch(monkeypatch, tmp_path):
    """Only lm-eval and transformers' torch models use torch: every other verb's process and Ray task runs with
    ``USE_TORCH=0`` (``job_env.NO_TORCH_ENV``; a tiny ``fit`` row: 16.8 -> 9.0 CPU-s,
    results/benchmarks/fixed-costs-2026-11-30.md); one that uses torch switches it on where it inherited an off."""
    from pipeline.cli import main, verbs_with
    from pipeline.execution.job_env import task_env

    monkeypatch.chdir(tmp_path)  # the data verbs' attempt records go beside their --out
    assert verbs_with("uses_torch") == {"prefetch-task", "lm-eval", "export-hf"}
    switch = {}

    def record(args):  # a verb's work: the switch its process runs with
        switch[args.verb] = os.environ["USE_TORCH"]

    for stage, command in (
        ("data", "cache --corpus c --tokenizer t --builder serial --out o"),
        ("planning", "fit --preset tiny"),
        ("planning", "status --preset tiny"),
        ("train", "pretrain --spec {} --run-dir r --cache c --tokenizer t"),
        ("evaluate", "downstream --run-dir r --tokenizer t --out-dir o --pair p --tasks t --shots 0"),
        ("evaluate", "export-hf r o --tokenizer t"),
    ):
        verb = command.split()[0]
        monkeypatch.setattr(f"pipeline.{stage}.commands._{verb.replace('-', '_')}", record)
        if verb == "export-hf":  # as a verb called before it in the same process, or a shell, may leave it
            monkeypatch.setenv("USE_TORCH", "0")
        else:
            monkeypatch.delenv("USE_TORCH", raising=False)
        assert main(command.split()) == 0
    assert switch == {"cache": "0", "fit": "0", "status": "0", "pretrain": "0", "downstream": "0", "export-hf": "AUTO"}
    monkeypatch.setenv("USE_TORCH", "0")
    assert (task_env(uses_torch=True)["USE_TORCH"], task_env(uses_torch=False)["USE_TORCH"]) == ("AUTO", "0")
