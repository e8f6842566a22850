"""Pretraining (one function of one ``RunSpec``): a fresh model of the run's family and dimensions, initialised by its
``init`` scheme (``pipeline.models.init``), trained on its dataset with
Levanter (the loop is ``pipeline.train.loop``, its configs ``pipeline.train.setup``, its checkpoints
``pipeline.train.checkpoints``).

JAX and Levanter are imported inside the function: the driver that submits it to Ray never loads them."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from pipeline.artifacts import atomic_write_yaml
from pipeline.config import RunSpec
from pipeline.config.specs import to_dict
from pipeline.train.identity import RunIdentity
from pipeline.train.loop import train_run
from pipeline.train.result import write_run_record


def pretrain(spec_json: str, run_dir: str, cache_dir: str, tokenizer_dir: str) -> dict[str, Any]:
    """Train one run for exactly ``spec.train.steps`` updates (resuming from checkpoints of the same fingerprint)
    and write its run folder."""
    from pipeline.models import build_initialised
    from pipeline.models.checkpoint import run_model_config

    started = time.time()
    logging.getLogger("pipeline").setLevel(logging.INFO)
    spec = RunSpec.from_json(spec_json)
    run_path = Path(run_dir)
    run_path.mkdir(parents=True, exist_ok=True)
    atomic_write_yaml(run_path / "config.yaml", to_dict(spec))
    model_config = run_model_config(spec)
    identity = RunIdentity.of(spec, Path(tokenizer_dir), Path(cache_dir))

    result = train_run(
        spec.run_id,
        spec.train,
        spec.model.seq_len,
        run_path,
        Path(cache_dir),
        Path(tokenizer_dir),
        lambda vocab, key: build_initialised(model_config, vocab, key=key, init=spec.model.init),
        identity,
    )
    summary = {
        "run_id": spec.run_id,
        "preset": spec.preset,
        "group": spec.group,
        "family": spec.model.family,
        "dataset": spec.dataset,
        "size": spec.size,
        "role": spec.role,
        "ablation": spec.ablation,
        "seed": spec.train.seed,
        "train_steps": spec.train.steps,
        **result.scores(),
    }
    write_run_record(run_path, started, result, summary)
    return summary
