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

    @classmethod
    def from_metrics(cls, records: list[dict], initial_val_loss: float | None, **fields) -> TrainingResult:
        """The result whose training-curve fields come from the run's ``metrics.jsonl`` ``records`` (all attempts):
        the last training loss, the mean throughput of the logged steps after the first (compiling) one, the
        micro-batch split of each attempt, and, for a resumed run (``initial_val_loss`` None), step 0's eval loss."""
        train_records = [r for r in records if "loss" in r]
        if initial_val_loss is None:
            initial_val_loss = next((r["eval_loss"] for r in records if r.get("step") == 0 and "eval_loss" in r), None)
        throughput = [r["tokens_per_s"] for r in train_records[1:]]
        return cls(
            initial_val_loss=initial_val_loss,
            final_train_loss=train_records[-1]["loss"] if train_records else None,
            mean_tokens_per_s=sum(throughput) / len(throughput) if throughput else None,
            micro_batches=[
                {
                    "from_step": r["step"],
                    "micro_batch": r["micro_batch"],
                    "gradient_accumulation": r["gradient_accumulation"],
                }
                for r in records
                if "micro_batch" in r
            ],
            **fields,
        )

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
