"""Checkpoint disk of one training run (docs/runs.md#what-is-kept): 12 bytes per parameter per checkpoint (f32
weights + Adam's two moments; for LoRA an upper bound, Levanter saves the trainable parameters only), times the
checkpoints it keeps when finished (``checkpoint_bytes``) and the most it holds while it trains
(``running_checkpoint_bytes``: the permanent ones, the ``KEPT_WHILE_TRAINING`` newest complete ones of
``pipeline.train.checkpoints`` and the one being written). The second is per running run, not per run."""

from __future__ import annotations

import math

from pipeline.config import TrainSpec
from pipeline.train.checkpoints import KEPT_WHILE_TRAINING

CHECKPOINT_BYTES_PER_PARAMETER = 12
"""f32 parameters plus Adam's first and second moments, 4 bytes each."""


def checkpoint_disk(parameters: int, train: TrainSpec | None) -> dict[str, int]:
    """``checkpoint_bytes`` and ``running_checkpoint_bytes`` of a run of ``parameters`` trained as ``train`` (both 0
    for a workload that trains nothing, ``train`` None). A finished run keeps the final checkpoint plus the periodic
    ones (steps 0 < s < steps-1, multiples of ``checkpoint_every``) whose step is a multiple of
    ``keep_checkpoints_every``; while it trains, the final one's place is taken by the one being written."""
    if train is None:
        return {"checkpoint_bytes": 0, "running_checkpoint_bytes": 0}
    kept = 1
    if train.keep_checkpoints_every:
        kept += (train.steps - 2) // math.lcm(train.checkpoint_every, train.keep_checkpoints_every)
    each = parameters * CHECKPOINT_BYTES_PER_PARAMETER
    return {"checkpoint_bytes": each * kept, "running_checkpoint_bytes": each * (kept + KEPT_WHILE_TRAINING)}
