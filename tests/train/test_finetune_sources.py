"""A fine-tune starts from its source run as the tiny DAG trained it (``tiny_dag_run``, tests/conftest.py) and
resamples it in one compiled program. This needs a trained source of the DAG's shapes, not its training
(tests/train/test_run_integrity.py trains runs, and scores a fine-tune on the split its spec names)."""

import re

import pytest

from pipeline.config import finetune_runs, load_preset, pretrain_runs

TINY = load_preset({"preset": "tiny"})
FINETUNES = finetune_runs(TINY, pretrain_runs(TINY))
pytestmark = pytest.mark.e2e


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
