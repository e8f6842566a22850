"""Bad runs stop with one sentence, a non-zero exit and no summary.json (issue 3's bad-input list, run side)."""

import dataclasses
import json
import re
from pathlib import Path

import pytest
import yaml
from cli_testkit import ROOT, pipeline_verb, snakemake_run, tiny_job

from pipeline.config import finetune_runs, load_preset, pretrain_runs


def fake_run_folder(path: Path, spec, vocab: int) -> Path:
    """A run folder with a resolved config and the metadata of a complete checkpoint whose embedding has ``vocab``
    rows (what the loader reads before touching any array)."""
    checkpoint = path / "checkpoints" / "step-9"
    zarray = checkpoint / "model" / "embeddings" / "token_embeddings" / "weight" / ".zarray"
    zarray.parent.mkdir(parents=True)
    zarray.write_text(json.dumps({"shape": [vocab, spec.model.hidden_dim]}))
    (checkpoint / "metadata.json").write_text(json.dumps({"step": 9, "timestamp": "2026-11-24T01:00:00"}))
    (path / "config.yaml").write_text(yaml.safe_dump(dataclasses.asdict(spec)))
    return path


def test_checkpoint_and_tokenizer_vocab_mismatch_is_named(tmp_path):
    from pipeline.models.checkpoint import load_run_model

    spec = pretrain_runs(load_preset({"preset": "tiny"}))["owt-small-gpt"]
    run = fake_run_folder(tmp_path / "owt-small-gpt", spec, vocab=2048)
    with pytest.raises(ValueError) as error:
        load_run_model(run, vocab_size=50257)
    assert str(error.value) == (
        f"{run}/checkpoints/step-9: the checkpoint's vocabulary has 2048 tokens but the "
        f"tokenizer has 50257; use the tokenizer the run was trained with."
    )


def test_finetune_without_its_source_checkpoint_stops_before_starting(tmp_path):
    tiny = load_preset({"preset": "tiny"})
    runs = pretrain_runs(tiny)
    spec = finetune_runs(tiny, runs)["ft-wt103-owt-diffeq6-n3-lora"]
    source = tmp_path / "wt103-ft18-diffeq"
    source.mkdir()
    (source / "config.yaml").write_text(yaml.safe_dump(dataclasses.asdict(runs["wt103-ft18-diffeq"])))
    run_dir = tmp_path / spec.run_id
    result = pipeline_verb(
        "finetune",
        "--spec",
        spec.to_json(),
        "--run-dir",
        str(run_dir),
        "--source",
        str(source),
        "--cache",
        str(tmp_path / "cache"),
        "--tokenizer",
        str(tmp_path / "tok"),
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {source}/checkpoints: no complete checkpoint (step-N/metadata.json); train the run first."
    )
    assert not (run_dir / "summary.json").exists()


def test_nan_loss_stops_the_run_and_says_so(tiny_data, tmp_path):
    from pipeline.train.loop import train_run
    from pipeline.train.step_log import NonFiniteLossError

    train = {"steps": 6, "lr": 1e12, "warmup_fraction": 0.0, "eval_every": 6, "checkpoint_every": 6, "eval_batches": 1}
    with pytest.raises(NonFiniteLossError) as error:
        train_run(tiny_job(tiny_data, tmp_path / "nan-run", **train))
    assert re.fullmatch(
        r"wt103-small-gpt: training loss became nan at step \d+; the run was stopped \(lower lr or check the data\)\.",
        str(error.value),
    )


def test_missing_profile_is_named():
    result = snakemake_run(ROOT, "-n", "--profile", "no-such-profile", timeout=60)
    assert result.returncode != 0
    assert "no-such-profile" in result.stderr and "profile" in result.stderr.lower()
