"""Every run trains exactly what its spec says (issue 12): exact steps over several passes, one compiled evaluation
step, micro-batches, resuming past corrupt checkpoints and the split a fine-tune is scored on (the loop itself:
``train_run`` of a tiny ``TrainJob`` in this process), checkpoints that belong to one fingerprint, GPUs that JAX must
see, and the resume-path faults as sentences (SIGTERM → checkpoint → resume: tests/test_driver_stop.py)."""

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cli_testkit import logged, pipeline_verb, pretrain_args, tiny_job, tiny_spec

from pipeline.artifacts import read_metrics
from pipeline.train.identity import IDENTITY_FILE, RunIdentity, cache_digest, claim_run_folder, tokenizer_digest
from pipeline.train.loop import train_run


@pytest.fixture(scope="module")
def small_cache(tiny_data, tmp_path_factory) -> Path:
    """A token cache of the first 200 training (20 validation) documents of the tiny OpenWebText stand-in."""
    import itertools

    from pipeline.data.cache import build_token_cache
    from pipeline.data.corpora import tiny_corpus_file
    from pipeline.data.files import iter_texts, write_jsonl

    root = tmp_path_factory.mktemp("small-cache")
    for split, documents in (("train", 200), ("validation", 20)):
        texts = itertools.islice(iter_texts([tiny_corpus_file("fortunes", split)]), documents)
        write_jsonl(root / f"{split}.jsonl", texts)
        build_token_cache([root / f"{split}.jsonl"], tiny_data / "tokenizers" / "bpe", root / "cache" / split)
    return root / "cache"


TRAINED = dict(steps=6, eval_every=2, checkpoint_every=2, keep_checkpoints_every=2, eval_batches=2, dropout=0.0)
"""The train fields of ``trained``: evaluated and checkpointed every 2 updates, without dropout."""


@pytest.fixture(scope="module")
def trained(tiny_data, tmp_path_factory) -> dict:
    """The tiny GPT trained for ``TRAINED`` through the ``pretrain`` verb's Ray task in this process: its run folder
    (read only: a test that changes it changes a copy), its summary and the compiles JAX logged on the way."""
    import jax

    from pipeline.train.runs import pretrain

    run_dir = tmp_path_factory.mktemp("trained") / "run"
    folders = str(tiny_data / "caches" / "wt103-bpe"), str(tiny_data / "tokenizers" / "bpe")
    with jax.log_compiles(), logged("jax._src.dispatch") as compiles:
        summary = pretrain(tiny_spec(**TRAINED).to_json(), str(run_dir), *folders)
    return {"run_dir": run_dir, "summary": summary, "compiles": compiles}


def test_a_run_longer_than_two_passes_takes_exactly_its_steps(tiny_data, small_cache, tmp_path):
    """A run of several passes over its data: Levanter's loader would stop at the end of the first."""
    run_dir = tmp_path / "multi-pass"
    job = tiny_job(tiny_data, run_dir, small_cache, steps=60, eval_every=30, checkpoint_every=20, eval_batches=1)
    result = train_run(job)
    assert result.steps_done == 60 and result.passes > 2 and result.tokens_seen == 60 * 8 * 64
    records = read_metrics(run_dir / "metrics.jsonl")
    assert [r["step"] for r in records if "loss" in r] == list(range(60))
    assert [r["step"] for r in records if "eval_loss" in r] == [0, 30, 60]
    losses = [r["loss"] for r in records if "loss" in r]
    assert max(losses[-10:]) < losses[0] - 1.0, "the loss curve continues past the first pass"
    kept = sorted(path.name for path in (run_dir / "checkpoints").glob("step-*"))
    assert kept == ["step-59"], "only the newest (final) checkpoint is kept by default"


def test_every_evaluation_of_a_run_runs_one_compiled_evaluation_step(trained):
    """The untrained model's evaluation, the periodic ones (their first ``eval_batches`` batches) and the final one
    (the whole split) all call one jitted Levanter evaluation step, compiled once per run: Levanter 1.2 compiled it
    again for the final evaluator and again on each evaluator's second batch (0.8–1.3 s of CPU per trace and compile
    on a tiny job; pipeline.train.trainer.held_out_evaluators). JAX logs each compile (``log_compiles``)."""
    assert [r["step"] for r in read_metrics(trained["run_dir"] / "metrics.jsonl") if "eval_loss" in r] == [0, 2, 4, 6]
    compiled = re.findall(r"Finished XLA compilation of jit\((\w+)\)", "\n".join(trained["compiles"]))
    assert "_train_step" in compiled, "JAX logged no compile of the run"
    assert compiled.count("accum_for_batch") == 1, compiled


RUNS_ONE_AFTER_ANOTHER = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from cli_testkit import tiny_job
from pipeline.train.loop import train_run
data, out = Path(sys.argv[2]), Path(sys.argv[3])
for name, train in json.loads(sys.argv[4]).items():
    print(f"== run {name}", file=sys.stderr, flush=True)
    train_run(tiny_job(data, out / name, **train))
"""
"""``train_run`` of ``tiny_job`` with each named set of train fields (JSON) in turn, in one process, as a warm worker
runs a DAG's jobs; its arguments: the tests' folder, the tiny data, the runs' folder and the runs."""


def test_runs_of_one_shape_reuse_the_compiled_programs_of_the_first(tiny_data, tmp_path):
    """Runs of the tiny GPT after a first one, in one JAX persistent compilation cache (JAX logs each cache miss),
    one after another in a fresh process (JAX opens its persistent cache once per process): with another seed, the
    run compiles nothing; with other step counts, learning rate, warm-up and Adam's β1, β2, ε, it compiles no train
    step and no evaluation step (only the initialisation, whose optimizer state starts from those numbers). Before,
    the schedule's numbers and β1, β2, ε were constants of the train step and the model's key one of the
    initialisation (``pipeline.train.schedule``), and programs compiled in under 1 s (the evaluation step) were not
    cached (``pipeline.train.setup.PERSISTENT_CACHE_EVERY_PROGRAM``)."""
    env = {"JAX_COMPILATION_CACHE_DIR": str(tmp_path / "jax-cache"), "JAX_EXPLAIN_CACHE_MISSES": "1"}
    shape = {"eval_every": 2, "checkpoint_every": 2, "eval_batches": 1}
    runs = {
        "first": dict(steps=2, **shape),
        "other seed": dict(steps=2, seed=1, **shape),
        "other numbers": dict(steps=4, lr=3e-3, warmup_fraction=0.5, beta1=0.8, beta2=0.95, epsilon=1e-6, **shape),
    }
    tests = str(Path(__file__).resolve().parents[1])
    result = subprocess.run(
        [sys.executable, "-c", RUNS_ONE_AFTER_ANOTHER, tests, str(tiny_data), str(tmp_path), json.dumps(runs)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    logs = dict(re.findall(r"== run ([\w ]+)\n(.*?)(?=\n== run |\Z)", result.stderr, re.S))
    misses = {name: set(re.findall(r"PERSISTENT COMPILATION CACHE MISS for '(\w+)'", logs[name])) for name in runs}
    assert {"jit__train_step", "jit_init_and_merge", "jit_accum_for_batch"} <= misses["first"]
    assert misses["other seed"] == set()
    assert not {"jit__train_step", "jit_accum_for_batch"} & misses["other numbers"]


def test_a_micro_batch_splits_each_update_into_the_same_update(tiny_data, trained, tmp_path):
    """``micro_batch_size`` 4 of a batch of 8 on one device: each update sums 2 accumulated micro-batches (Levanter's
    ``per_device_parallelism``), trains the same updates as the whole batch at once (``trained``: without dropout,
    whose masks are drawn per micro-batch: losses equal to float rounding), and the run's result (its
    ``summary.json``) and ``config.yaml`` record the split it trained with."""
    run_dir = tmp_path / "micro-4"
    result = train_run(tiny_job(tiny_data, run_dir, micro_batch_size=4, **TRAINED))
    assert result.micro_batches == [{"from_step": 0, "micro_batch": 4, "gradient_accumulation": 2}]
    assert trained["summary"]["micro_batches"] == [{"from_step": 0, "micro_batch": 8, "gradient_accumulation": 1}]
    for folder, micro_batch in ((run_dir, 4), (trained["run_dir"], None)):
        assert yaml.safe_load((folder / "config.yaml").read_text())["train"]["micro_batch_size"] == micro_batch
    losses = [
        [r["loss"] for r in read_metrics(folder / "metrics.jsonl") if "loss" in r]
        for folder in (run_dir, trained["run_dir"])
    ]
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)


def test_a_fine_tune_is_scored_on_the_split_its_spec_names(tiny_data, trained, tmp_path):
    """docs/paper.md#fine-tune-test-split: a fine-tune into WikiText-103 is scored on its test split. Step 0 of a full
    fine-tune of a GPT source is the source itself, so its loss equals the source's validation loss on ``validation``
    and not on ``test``. The source: ``trained``; both run in this process through the verbs' Ray task functions (a
    ``TrainJob`` each, and its summary)."""
    from pipeline.config import finetune_runs, load_preset, pretrain_runs
    from pipeline.train.runs import finetune

    tiny = load_preset({"preset": "tiny"})
    tuned = finetune_runs(tiny, pretrain_runs(tiny))["ft-owt-wt103-gpt8-full"]
    assert tuned.eval_split == "test"
    source_dir, source_loss = str(trained["run_dir"]), trained["summary"]["val_loss"]
    folders = str(tiny_data / "caches" / "wt103-bpe"), str(tiny_data / "tokenizers" / "bpe")
    losses = {}
    for split in ("validation", "test"):
        train = dataclasses.replace(tuned.train, steps=1, eval_batches=None)
        spec = dataclasses.replace(
            tuned, source_run=trained["summary"]["run_id"], source_dataset="wt103", eval_split=split, train=train
        )
        summary = finetune(spec.to_json(), str(tmp_path / split), source_dir, *folders)
        assert summary["eval_split"] == split
        losses[split] = summary["initial_val_loss"]
    assert abs(losses["validation"] - source_loss) < 1e-5
    assert abs(losses["test"] - source_loss) > 1e-3


def test_a_cache_without_the_test_split_a_fine_tune_is_scored_on_is_named(tiny_data, small_cache):
    from pipeline.train.setup import evaluation_set

    with pytest.raises(
        FileNotFoundError,
        match=r"small-cache.*/cache/test: the token cache has no 'test' split; set "
        r"test_split: true in its dataset's source",
    ):
        evaluation_set(None, None, small_cache, "test")


def test_gpus_the_machine_does_not_have_are_refused_before_training(tiny_data, tmp_path):
    run_dir = tmp_path / "gpu-run"
    result = pipeline_verb(*pretrain_args(tiny_spec(), run_dir, tiny_data, "--gpus", "1"), timeout=120)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "error: pretrain: the job asks for 1 GPU(s) but the Ray cluster (embedded local Ray) has 0; run on a GPU "
        "node or with --gpus 0."
    )
    assert not (run_dir / "summary.json").exists()


def test_jax_without_the_accelerators_the_job_was_given_is_refused():
    """Ray may hand a task GPUs that a CPU-only jaxlib cannot use: the task refuses before training."""
    from pipeline.train.setup import AcceleratorError, require_accelerators

    require_accelerators(0)
    with pytest.raises(AcceleratorError, match=r"given 2 GPU\(s\) but JAX .* sees 0 accelerator") as refusal:
        require_accelerators(2)
    assert "build the CUDA venv on the login node with PIPELINE_ACCELERATOR=cuda on the shared filesystem" in str(
        refusal.value
    )


def test_a_corrupt_newest_checkpoint_is_moved_aside_and_the_run_resumes_from_the_previous_one(
    tiny_data, trained, tmp_path
):
    """A torn array file in the newest complete checkpoint (its checksums disagree) and one in the next (no checksums:
    Levanter's load fails) of a copy of ``trained`` are both moved aside; the same job, run again, resumes from the
    one before and finishes exactly."""
    run_dir = Path(shutil.copytree(trained["run_dir"], tmp_path / "corrupt"))
    job = tiny_job(tiny_data, run_dir, **TRAINED)
    checkpoints = run_dir / "checkpoints"
    assert sorted(p.name for p in checkpoints.glob("step-*")) == ["step-2", "step-4", "step-5"]
    for step in (4, 5):
        chunks = [
            path
            for path in (checkpoints / f"step-{step}").rglob("*")
            if path.is_file() and not path.name.endswith((".json", "zarray", "zattrs"))
        ]
        max(chunks, key=lambda path: path.stat().st_size).write_bytes(b"\x00torn write")
    (checkpoints / "step-4" / "checksums.json").unlink()

    with logged("pipeline.train.checkpoints") as messages:
        result = train_run(job)
    log = "\n".join(messages)
    assert result.resumed_from_step == 3 and result.steps_done == 6
    assert [r["step"] for r in read_metrics(run_dir / "metrics.jsonl") if "loss" in r] == list(range(6))
    assert sorted(p.name for p in (run_dir / "unreadable-checkpoints").iterdir()) == ["step-4", "step-5"]
    assert "step-5 (" in log and "no longer match the checksums written at its save" in log
    assert "step-4 (" in log and "it failed to load" in log


def test_checkpoints_of_another_fingerprint_are_moved_aside_and_the_same_one_resumes(tiny_data, tmp_path, caplog):
    tokenizer, cache = tiny_data / "tokenizers" / "bpe", tiny_data / "caches" / "wt103-bpe"
    first = RunIdentity.of(tiny_spec(lr=0.003, eval_every=20), tokenizer, cache)
    changed = RunIdentity.of(tiny_spec(lr=0.0001, eval_every=20), tokenizer, cache)
    assert first.fingerprint != changed.fingerprint
    assert (
        first.fingerprint
        != RunIdentity.of(tiny_spec(lr=0.003, eval_every=20), tokenizer, cache, "source-a").fingerprint
    )
    how_often = {
        "eval_every": 5,
        "eval_batches": 1,
        "checkpoint_every": 7,
        "keep_checkpoints_every": 70,
        "micro_batch_size": 2,
    }
    assert first.fingerprint == RunIdentity.of(tiny_spec(lr=0.003, **how_often), tokenizer, cache).fingerprint, (
        "how often a run is evaluated or checkpointed does not decide its weights"
    )

    run_dir = tmp_path / "run"
    assert claim_run_folder(run_dir, first) is None
    (run_dir / "checkpoints" / "step-39").mkdir()
    (run_dir / "metrics.jsonl").write_text('{"step": 0, "loss": 7.0}\n')
    assert claim_run_folder(run_dir, first) is None, "the same fingerprint keeps its checkpoints"
    assert (run_dir / "checkpoints" / "step-39").is_dir()

    moved = claim_run_folder(run_dir, changed)
    assert moved.parent == run_dir / "superseded" and moved.name.endswith(first.fingerprint[:12])
    assert (moved / "checkpoints" / "step-39").is_dir() and (moved / "metrics.jsonl").is_file()
    assert not (run_dir / "metrics.jsonl").exists()
    assert [p.name for p in (run_dir / "checkpoints").iterdir()] == [IDENTITY_FILE]
    assert f"moved to {moved}" in caplog.text and "training starts from step 0" in caplog.text


def test_checkpoints_without_a_fingerprint_are_moved_aside(tiny_data, tmp_path):
    """Checkpoints written before fingerprints existed (an older spec) are never resumed."""
    run_dir = tmp_path / "legacy"
    (run_dir / "checkpoints" / "step-39").mkdir(parents=True)
    identity = RunIdentity.of(tiny_spec(), tiny_data / "tokenizers" / "bpe", tiny_data / "caches" / "wt103-bpe")
    moved = claim_run_folder(run_dir, identity)
    assert moved.name.endswith("-unfingerprinted") and (moved / "checkpoints" / "step-39").is_dir()


def test_a_retrained_tokenizer_of_the_same_size_changes_the_fingerprint(tiny_data, tmp_path):
    copy = tmp_path / "bpe"
    shutil.copytree(tiny_data / "tokenizers" / "bpe", copy)
    before = tokenizer_digest(copy)
    tokenizer = json.loads((copy / "tokenizer.json").read_text())
    merges = tokenizer["model"]["merges"]
    merges[0], merges[1] = merges[1], merges[0]
    (copy / "tokenizer.json").write_text(json.dumps(tokenizer))
    assert tokenizer_digest(copy) != before


def test_a_cache_without_its_validation_ledger_is_named(tiny_data, tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(tiny_data / "caches" / "wt103-bpe", cache)
    (cache / "validation" / "shard_ledger.json").unlink()
    with pytest.raises(FileNotFoundError) as error:
        cache_digest(cache)
    assert str(error.value) == (
        f"{cache}/validation/shard_ledger.json: missing; the token cache {cache} has no "
        f"complete 'validation' split (rebuild it: delete {cache} and rerun its rule)."
    )


def test_a_torn_last_metrics_line_is_dropped_and_a_corrupt_one_is_named(tmp_path, caplog):
    from pipeline.artifacts import read_metrics, resume_metrics

    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 0, "loss": 7.0}\n{"step": 1, "loss": 6.9}\n{"step": 2, "lo')
    assert read_metrics(path) == [{"step": 0, "loss": 7.0}, {"step": 1, "loss": 6.9}]
    assert f"{path}: line 3 is torn" in caplog.text
    resume_metrics(path, 2)
    assert read_metrics(path) == [{"step": 0, "loss": 7.0}, {"step": 1, "loss": 6.9}]
    path.write_text('{"step": 0, "eval_loss": 7.6}\n{"step": 0, "loss": 7.0}\n')
    resume_metrics(path, 0)
    assert read_metrics(path) == [], "a run restarting at step 0 evaluates its start again, once"

    path.write_text('{"step": 0, "loss": 7.0}\n{"step": 1, "lo\n{"step": 2, "loss": 6.8}\n')
    with pytest.raises(ValueError) as error:
        read_metrics(path)
    assert str(error.value).startswith(f"{path}: line 2 is not JSON; the metrics log is corrupt")


def complete_checkpoint(folder: Path, step: int, files: dict[str, bytes]) -> Path:
    """A checkpoint folder as Levanter leaves it (array files, then metadata.json) and its checksums."""
    from pipeline.train.checkpoints import write_checksums

    checkpoint = folder / f"step-{step}"
    for name, content in files.items():
        (checkpoint / name).parent.mkdir(parents=True, exist_ok=True)
        (checkpoint / name).write_bytes(content)
    (checkpoint / "metadata.json").write_text(json.dumps({"step": step}))
    write_checksums(checkpoint)
    return checkpoint


def test_damaged_checkpoints_are_moved_aside_newest_first_down_to_a_good_one(tmp_path, caplog):
    from pipeline.train.checkpoints import set_aside_damaged

    checkpoints = tmp_path / "run" / "checkpoints"
    for step in (19, 39, 59):
        complete_checkpoint(checkpoints, step, {"model/w/c/0": b"chunk" * 100})
    (checkpoints / "step-19" / "metadata.json").write_text("")
    (checkpoints / "step-59" / "model" / "w" / "c" / "0").write_bytes(b"torn")
    set_aside_damaged(checkpoints)
    assert sorted(p.name for p in checkpoints.iterdir()) == ["step-39"]
    aside = tmp_path / "run" / "unreadable-checkpoints"
    assert sorted(p.name for p in aside.iterdir()) == ["step-19", "step-59"]
    assert (
        f"{checkpoints}/step-59 (0.0 MB) cannot be resumed: 1 of its 2 files no longer match the checksums "
        f"written at its save (model/w/c/0); moved to {aside}/step-59"
    ) in caplog.text
    assert "step-19 (0.0 MB) cannot be resumed: its metadata.json is empty or corrupt" in caplog.text


def test_a_checkpoint_without_checksums_that_fails_to_load_is_moved_aside_and_the_previous_one_loads(tmp_path):
    from pipeline.train.checkpoints import CHECKSUMS_FILE, resume_or_initialize

    checkpoints = tmp_path / "run" / "checkpoints"
    for step in (19, 39):
        complete_checkpoint(checkpoints, step, {"model/w/c/0": b"chunk"})
    (checkpoints / "step-39" / CHECKSUMS_FILE).unlink()
    loads = []

    def load_newest():
        newest = max(checkpoints.glob("step-*"), key=lambda path: int(path.name[5:]))
        loads.append(newest.name)
        if newest.name == "step-39":
            raise ValueError("FAILED_PRECONDITION: Error reading local file: ZSTD_decompressStream() failed")
        return newest.name

    assert resume_or_initialize(load_newest, checkpoints) == "step-19" and loads == ["step-39", "step-19"]
    assert (tmp_path / "run" / "unreadable-checkpoints" / "step-39").is_dir()

    def fail():
        raise ValueError("out of host memory")

    with pytest.raises(ValueError, match="out of host memory"):
        resume_or_initialize(fail, checkpoints)
    assert (checkpoints / "step-19").is_dir(), "a checkpoint matching its checksums is not blamed for a failure"


def test_pruning_keeps_the_two_newest_complete_checkpoints_once_the_newest_is_verified(tmp_path):
    from pipeline.train.checkpoints import prune_checkpoints

    for step in (10, 20, 30, 40):
        complete_checkpoint(tmp_path, step, {"w": str(step).encode()})
    (tmp_path / "step-50").mkdir()  # being written
    (tmp_path / "step-40" / "w").write_bytes(b"torn")
    prune_checkpoints(tmp_path, keep_every=None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-10", "step-20", "step-30", "step-40", "step-50"], (
        "nothing is deleted while the newest does not verify"
    )
    (tmp_path / "step-40" / "w").write_bytes(b"40")
    prune_checkpoints(tmp_path, keep_every=20)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-20", "step-30", "step-40", "step-50"]
    prune_checkpoints(tmp_path, keep_every=None, keep=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-40", "step-50"]
