"""A trained run folder → its Levanter model, shared by fine-tunes, evaluation and analyses: ``config.yaml`` (the
``RunSpec``) and the newest complete ``checkpoints/step-N/`` (Levanter's ``discover_latest_checkpoint``)."""

import dataclasses
import json
from pathlib import Path

from pipeline.artifacts import missing_checkpoint, read_run_spec
from pipeline.config import LLAMA_FAMILIES, RunSpec

EMBEDDING_ARRAY = Path("model/embeddings/token_embeddings/weight/.zarray")
"""Levanter's zarr metadata of the token embedding (shape [vocab, hidden]) inside a checkpoint; every family has it."""


def run_model_config(spec: RunSpec):
    """The Levanter ``LmConfig`` of a run (``pipeline.models.build_initialised`` applies its ``init`` scheme);
    dropout for the GPT families only (docs/paper.md#pretraining-grid)."""
    from pipeline.models import build_model_config

    dimensions = {
        k: v for k, v in dataclasses.asdict(spec.model).items() if k not in ("family", "init") and v is not None
    }
    dropout = None if spec.model.family in LLAMA_FAMILIES else spec.train.dropout
    return build_model_config(spec.model.family, dropout=dropout, **dimensions)


def final_checkpoint(run_dir: str | Path) -> str:
    """The newest complete Levanter checkpoint ``<run_dir>/checkpoints/step-N`` (a path or URL)."""
    from levanter.checkpoint import discover_latest_checkpoint

    checkpoint = discover_latest_checkpoint(f"{run_dir}/checkpoints")
    if checkpoint is None:
        raise missing_checkpoint(run_dir)
    return checkpoint


def load_run_model(run_dir: str | Path, vocab_size: int):
    """``(spec, model)`` of a trained run, its final checkpoint on the local devices (no sharding). A checkpoint
    of another ``vocab_size`` is refused naming both sizes (it would otherwise misalign ids or fail in tensorstore)."""
    import fsspec

    spec = read_run_spec(run_dir)
    checkpoint = final_checkpoint(run_dir)
    metadata = f"{checkpoint}/{EMBEDDING_ARRAY}"
    try:
        with fsspec.open(metadata, "r") as stream:
            stored = int(json.load(stream)["shape"][0])
    except FileNotFoundError:
        raise FileNotFoundError(f"{metadata}: missing; {checkpoint} is not a complete model checkpoint.") from None
    if stored != vocab_size:
        raise ValueError(
            f"{checkpoint}: the checkpoint's vocabulary has {stored} tokens but the tokenizer has "
            f"{vocab_size}; use the tokenizer the run was trained with."
        )

    import equinox as eqx
    import jax
    import numpy as np
    from haliax import Axis
    from levanter.checkpoint import load_checkpoint

    config = run_model_config(spec)
    template = eqx.filter_eval_shape(config.build, Axis("vocab", vocab_size), key=jax.random.PRNGKey(0))
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("data", "model"))
    model = load_checkpoint(template, checkpoint, subpath="model", discover_latest=False, mesh=mesh, axis_mapping={})
    return spec, model


def load_diffeq_run(run_dir: str | Path, vocab_size: int, analysis: str):
    """``(spec, model)`` of a trained GPT-style DiffEqFormer (``load_run_model``) in inference mode; a run of another
    family is refused in a sentence naming ``analysis``."""
    from levanter.utils.tree_utils import inference_mode

    spec, model = load_run_model(run_dir, vocab_size)
    if spec.model.family != "diffeq":
        raise ValueError(
            f"{run_dir}/config.yaml: model.family is {spec.model.family!r}; {analysis} needs a GPT-style "
            f"DiffEqFormer (diffeq)."
        )
    return spec, inference_mode(model, True)
