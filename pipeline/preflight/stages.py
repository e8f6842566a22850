"""The work of the preflight's jobs after pretraining, one per kind (docs/cluster.md#preflight): on the checkpoint of
the preflight pretraining of its source run's shape (never a real run's), the function its real verb runs, bounded
(``STAGE_WORK``: each function says how)."""

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
    """Where a stage job reads and writes (absolute paths)."""

    source: str
    job: str
    cache: str
    tokenizer: str


def finetune(settings: dict[str, Any], folders: StageFolders, micro_batch: int) -> dict[str, Any]:
    """The grid's first fine-tune of a method on the preflight source, resampled, for ``FINETUNE_UPDATES`` updates of
    the real loop (no run summary); its step time, tokens/s and micro-batch."""
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
        f"{folders.job}/lm_eval",
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

    untrained = f"{folders.job}/spectra_untrained.csv"
    return run_spectra(
        folders.source, folders.tokenizer, f"{folders.job}/spectra.csv", settings["time_oversampling"], untrained
    )


def lyapunov(settings: dict[str, Any], folders: StageFolders, micro_batch: int) -> Any:
    """The Lyapunov verb's function on its first sentence."""
    from pipeline.analysis.lyapunov import run_lyapunov

    csv, page = f"{folders.job}/lyapunov.csv", f"{folders.job}/lyapunov.html"
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
        f"{folders.job}/frontier.csv",
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
"""The work of each kind's stage job, given ``StageJob.settings``, the job's folders and its micro-batch."""


def measured_stage(kind: str, settings: dict[str, Any], folders: StageFolders, micro_batch: int) -> dict[str, Any]:
    """The Ray task of a ``preflight-stage`` job: its work, timed, with the devices and the peak memory."""
    started = time.perf_counter()
    result = STAGE_WORK[kind](settings, folders, micro_batch)
    wall_s = time.perf_counter() - started
    measured = result if isinstance(result, dict) and "median_step_s" in result else {}
    return {**device_columns(), **measured, "wall_s": wall_s, **peak_memory()}
