"""The work of the preflight's jobs after pretraining (``pipeline.planning.preflight_jobs.StageJob``), one per kind: the
resampled fine-tune (LoRA and full), one lm-eval job, spectra, Lyapunov and frontier. Each reads the checkpoint of
the preflight pretraining of its source run's shape (``<preflight>/<shape>/train``, never a real run's) and runs the
function its real verb runs, bounded (``STAGE_WORK``: each function says how). Each row holds the job's seconds of
work (``wall_s``) and peak memory; the fine-tune also its step time and tokens/s. A column that does not apply to a
kind holds "n/a" (``report.NOT_APPLICABLE``)."""

from __future__ import annotations

import dataclasses
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.evaluate import BATCH_SIZE
from pipeline.planning.grid import FINETUNE_METHODS
from pipeline.preflight.job import device_columns, peak_memory, training_columns

FINETUNE_UPDATES = 3
LM_EVAL_LIMIT = 2
FRONTIER_BATCHES = 1


@dataclasses.dataclass(frozen=True)
class StageFolders:
    """Where a stage job reads and writes: the source shape's preflight training folder, its own folder, the token
    cache and the tokenizer (absolute paths)."""

    source: str
    job: str
    cache: str
    tokenizer: str

    def out(self, name: str) -> str:
        """The path of its output ``name`` in its own folder."""
        return str(Path(self.job) / name)


def finetune(settings: dict[str, Any], folders: StageFolders, micro_batch: int) -> dict[str, Any]:
    """A fine-tune method's job: the grid's first fine-tune of that method on the preflight source, resampled
    (``pipeline.train.finetune.resampled_source``), then ``FINETUNE_UPDATES`` updates of the real loop with one
    evaluation and one checkpoint at the last, no run summary; its step time, tokens/s and micro-batch."""
    from pipeline.artifacts import read_run_spec
    from pipeline.config import FinetuneSpec
    from pipeline.train.loop import TrainJob, train_run

    source_spec = read_run_spec(folders.source)
    spec = FinetuneSpec.from_dict(settings).bounded(FINETUNE_UPDATES, micro_batch)
    spec = dataclasses.replace(spec, source_run=source_spec.run_id)
    train_dir = Path(folders.job) / "train"
    shutil.rmtree(train_dir, ignore_errors=True)
    train_run(TrainJob.finetuning(spec, train_dir, folders.source, folders.cache, folders.tokenizer, preflight=True))
    return training_columns(train_dir, 1, spec.train.batch_size * source_spec.model.seq_len)  # the first compiles


def downstream(settings: dict[str, Any], folders: StageFolders, micro_batch: int) -> Any:
    """lm-eval (``evaluate_downstream``) at ``limit`` ``LM_EVAL_LIMIT``, the first shot count."""
    from pipeline.evaluate.harness import evaluate_downstream

    return evaluate_downstream(
        folders.source,
        folders.tokenizer,
        folders.out("lm_eval"),
        pair=settings["pair"],
        tasks=settings["tasks"],
        shots=settings["shots"][:1],
        task_dir=settings["task_dir"],
        limit=LM_EVAL_LIMIT,
        batch_size=BATCH_SIZE,
        prefetched=settings["prefetched"],
    )


def spectra(settings: dict[str, Any], folders: StageFolders, micro_batch: int) -> Any:
    """The spectra verb's function as it is."""
    from pipeline.analysis.spectra import run_spectra

    untrained = folders.out("spectra_untrained.csv")
    return run_spectra(
        folders.source, folders.tokenizer, folders.out("spectra.csv"), settings["time_oversampling"], untrained
    )


def lyapunov(settings: dict[str, Any], folders: StageFolders, micro_batch: int) -> Any:
    """The Lyapunov verb's function on its first sentence."""
    from pipeline.analysis.lyapunov import run_lyapunov

    csv, page = folders.out("lyapunov.csv"), folders.out("lyapunov.html")
    return run_lyapunov(
        folders.source, folders.tokenizer, csv, page, settings["sentences"][:1], settings["output_token"]
    )


def frontier(settings: dict[str, Any], folders: StageFolders, micro_batch: int) -> Any:
    """The frontier verb's function on ``FRONTIER_BATCHES`` validation batch per solver and step count."""
    from pipeline.analysis.frontier import run_frontier

    return run_frontier(
        folders.source,
        folders.cache,
        folders.tokenizer,
        folders.out("frontier.csv"),
        settings["step_factors"],
        settings["solvers"],
        settings.get("batch_size", 32),
        FRONTIER_BATCHES,
    )


STAGE_WORK: dict[str, Callable[[dict[str, Any], StageFolders, int], Any]] = {
    **{f"finetune-{method}": finetune for method in FINETUNE_METHODS},
    "downstream": downstream,
    "spectra": spectra,
    "lyapunov": lyapunov,
    "frontier": frontier,
}
"""The work of the stage jobs of each kind: the function the real verb of that kind runs, bounded (module
docstring), given ``settings`` (the fine-tune's spec, or the preset's ``downstream`` or ``analysis.<kind>`` section:
``StageJob.settings``), the job's folders and its micro-batch."""


def measured_stage(kind: str, settings: dict[str, Any], folders: StageFolders, micro_batch: int) -> dict[str, Any]:
    """The Ray task of a ``preflight-stage`` job: the work of a stage job of ``kind``, timed, with the devices and the
    peak memory it left."""
    started = time.perf_counter()
    result = STAGE_WORK[kind](settings, folders, micro_batch)
    wall_s = time.perf_counter() - started
    peak_bytes, memory_source = peak_memory()
    measured = result if isinstance(result, dict) and "median_step_s" in result else {}
    return {
        **device_columns(),
        **measured,
        "wall_s": wall_s,
        "peak_memory_bytes": peak_bytes,
        "memory_source": memory_source,
    }
