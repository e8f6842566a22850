"""What a finished training run reports (``TrainingResult``) and how its run folder records it."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from pipeline.artifacts import atomic_write_json, provenance


@dataclasses.dataclass(frozen=True)
class TrainingResult:
    """What a finished run reports: parameter counts, where it resumed, its held-out scores (``val_*``: on
    ``eval_split``), its devices, and how its batches were split: ``micro_batches``, one entry per attempt that
    trained (a resume may run at another micro-batch), from the update it started at (``from_step``):
    ``micro_batch`` examples per device per forward/backward (Levanter's resolved ``per_device_parallelism``) and
    ``gradient_accumulation`` micro-batches summed per update (batch = micro_batch × data-parallel devices ×
    gradient_accumulation)."""

    parameters: int
    trainable_parameters: int
    resumed_from_step: int
    steps_done: int
    tokens_seen: int
    train_examples: int
    passes: float
    fingerprint: str
    eval_split: str
    initial_val_loss: float | None
    val_loss: float
    val_bpb: float
    final_train_loss: float | None
    mean_tokens_per_s: float | None
    devices: list[str]
    micro_batches: list[dict[str, int]]

    def scores(self) -> dict[str, Any]:
        """The summary fields every run shares: parameter counts, final losses, perplexity exp(NLL) on
        ``eval_split``, throughput."""
        return {
            "parameters": self.parameters,
            "final_train_loss": self.final_train_loss,
            "eval_split": self.eval_split,
            "val_loss": self.val_loss,
            "val_ppl": math.exp(self.val_loss),
            "val_bpb": self.val_bpb,
            "mean_tokens_per_s": self.mean_tokens_per_s,
            "resumed_from_step": self.resumed_from_step,
            "steps_done": self.steps_done,
            "tokens_seen": self.tokens_seen,
            "passes": self.passes,
            "micro_batches": self.micro_batches,
            "fingerprint": self.fingerprint,
        }


def write_run_record(run_dir: Path, started: float, result: TrainingResult, summary: dict[str, Any]) -> None:
    """``provenance.json``, then ``summary.json`` last: its presence means the run is complete."""
    atomic_write_json(run_dir / "provenance.json", provenance(started, result.devices))
    atomic_write_json(run_dir / "summary.json", summary)
