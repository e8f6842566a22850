"""What a finished training run reports (``TrainingResult``) and how its run folder records it."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from pipeline.artifacts import atomic_write_json, provenance


@dataclasses.dataclass(frozen=True)
class TrainingResult:
    """What a finished run reports: parameter counts, where it resumed, held-out scores (``val_*`` on
    ``eval_split``), devices, and ``micro_batches``: per attempt, from ``from_step``, ``micro_batch`` examples per
    device per pass and ``gradient_accumulation`` (batch = micro_batch × data-parallel devices × accumulation)."""

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
        """The result with training-curve fields from ``metrics.jsonl`` ``records``: last loss, mean throughput after
        the first (compiling) step, each attempt's micro-batch split, and step 0's eval loss of a resumed run."""
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
        ``eval_split``, throughput (a new field of the result enters ``summary.json`` only when named here)."""
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


def write_run_record(spec, run_dir: Path, started: float, result: TrainingResult, fields: dict[str, Any]) -> dict:
    """``provenance.json``, then ``summary.json`` last (its presence means the run is complete): the ``RunSpec`` or
    ``FinetuneSpec``'s identity, its ``fields``, and the run's ``scores``; returns the summary."""
    identity = {"run_id": spec.run_id, "preset": spec.preset, "seed": spec.train.seed, "train_steps": spec.train.steps}
    summary = {**identity, **fields, **result.scores()}
    atomic_write_json(run_dir / "provenance.json", provenance(started, result.devices))
    atomic_write_json(run_dir / "summary.json", summary)
    return summary
