"""A fine-tune starts from its source run as the tiny DAG trained it (``tiny_dag_run``, tests/conftest.py): it is
scored on the split its spec names, and resamples its source in one compiled program. These tests need a trained
source, not its training (tests/train/test_run_integrity.py trains runs)."""

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.config import finetune_runs, load_preset, pretrain_runs

ROOT = Path(__file__).resolve().parents[2]
TINY = load_preset({"preset": "tiny"})
FINETUNES = finetune_runs(TINY, pretrain_runs(TINY))
pytestmark = pytest.mark.e2e


def finetune(spec, run_dir: Path, source_dir: Path, data: Path) -> subprocess.CompletedProcess:
    """The ``finetune`` verb on the WikiText-103 cache, in one Ray CPU."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline",
            "finetune",
            "--spec",
            spec.to_json(),
            "--run-dir",
            str(run_dir),
            "--source",
            str(source_dir),
            "--cache",
            str(data / "caches" / "wt103-bpe"),
            "--tokenizer",
            str(data / "tokenizers" / "bpe"),
            "--ray-num-cpus",
            "1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "RAY_AUTH_MODE": "disabled"},
        timeout=600,
    )


def test_a_fine_tune_is_scored_on_the_split_its_spec_names(tiny_dag, tiny_dag_run, tmp_path):
    """docs/paper.md#fine-tune-test-split: a fine-tune into WikiText-103 is scored on its test split. Step 0 of a full
    fine-tune of a GPT source is the source itself, so its loss equals the source's validation loss on ``validation``
    and not on ``test``. The source is the DAG's GPT of the fine-tune's shape trained on WikiText-103 (its own, from
    OpenWebText, has its validation loss on OpenWebText)."""
    tuned = FINETUNES["ft-owt-wt103-gpt8-full"]
    assert tuned.eval_split == "test"
    source_dir = tiny_dag_run("wt103-gpt24-gpt")
    source_loss = json.loads((source_dir / "summary.json").read_text())["val_loss"]
    losses = {}
    for split in ("validation", "test"):
        spec = dataclasses.replace(
            tuned,
            source_run="wt103-gpt24-gpt",
            source_dataset="wt103",
            eval_split=split,
            train=dataclasses.replace(tuned.train, steps=1, eval_batches=None),
        )
        run_dir = tmp_path / split
        result = finetune(spec, run_dir, source_dir, tiny_dag / "data")
        assert result.returncode == 0, result.stderr[-3000:]
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["eval_split"] == split
        losses[split] = summary["initial_val_loss"]
    assert abs(losses["validation"] - source_loss) < 1e-5
    assert abs(losses["test"] - source_loss) > 1e-3


def test_a_fine_tune_resamples_its_source_in_one_compiled_program(tiny_dag, tiny_dag_run, caplog):
    """Discretising a DiffEqFormer source to N' steps and wrapping it with LoRA adapters runs as one jitted program
    (op by op, each of its small operations compiled on its own: 2.2 s of a tiny fine-tune's 4.5 s set-up), and
    gives the model the op-by-op ``resample`` gives."""
    import jax
    import jax.numpy as jnp
    from levanter.compat.hf_checkpoints import load_tokenizer

    from pipeline.models.checkpoint import load_run_model
    from pipeline.train.finetune import resample, resampled_source

    tuned = FINETUNES["ft-wt103-owt-diffeq6-n3-lora"]
    source_dir = tiny_dag_run(tuned.source_run)
    vocab_size = len(load_tokenizer(str(tiny_dag / "data" / "tokenizers" / "bpe")))
    key = jax.random.PRNGKey(0)
    with jax.log_compiles(), caplog.at_level("WARNING", logger="jax._src.dispatch"):
        resampled = resampled_source(tuned, source_dir, vocab_size, key)
    compiled = re.findall(r"Finished XLA compilation of jit\((.+?)\)", caplog.text)
    assert compiled.count("<lambda>") == 1 and len(compiled) <= 2, compiled  # + the checkpoint load's dtype cast
    op_by_op = resample(tuned, load_run_model(source_dir, vocab_size)[1], key)
    pairs = zip(jax.tree.leaves(resampled), jax.tree.leaves(op_by_op), strict=True)
    assert all(jnp.allclose(a, b, rtol=1e-6, atol=1e-7) for a, b in pairs)
