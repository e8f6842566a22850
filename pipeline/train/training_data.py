"""The training set of one run: the token cache's train split, shuffled, cycled so that exactly ``steps`` updates
of ``batch_size`` examples exist (docs/paper.md#exact-steps): the same permutation every pass, as the reference
loader does. Levanter's loader would stop at the end of the first pass."""

from __future__ import annotations

import dataclasses
import logging
import math
from pathlib import Path

from pipeline.config import TrainSpec

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class CycledTrainingSet:
    """``dataset``: ``passes_needed`` passes over the ``examples`` shuffled examples of one pass."""

    dataset: object
    examples: int


def cycled_training_set(data, Pos, batch_schedule, train: TrainSpec, data_key, cache_dir: Path, run_id: str):
    """The shuffled train split of ``data`` (examples of ``Pos``) repeated ceil(steps · batch / examples) times; a
    split without one example of ``Pos`` is an error naming the cache and the run."""
    from levanter.data.dataset import EpochDataset

    one_pass = data.train_set(Pos, batch_schedule, key=data_key)
    examples = len(one_pass.as_sync_dataset())
    if examples == 0:
        raise ValueError(
            f"{cache_dir / 'train'}: the training split has no example of {Pos.size} tokens; "
            f"use a larger corpus or a shorter seq_len for {run_id}."
        )
    passes = train.steps * train.batch_size / examples
    logger.info(
        "%s: %d updates × %d examples over %d training examples = %.2f passes",
        run_id,
        train.steps,
        train.batch_size,
        examples,
        passes,
    )
    return CycledTrainingSet(EpochDataset(one_pass, max_epochs=math.ceil(passes)), examples)
