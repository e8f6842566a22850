"""The Levanter training loop shared by pretraining and fine-tuning (docs/runs.md).

AdamW with linear warm-up then cosine decay to ``min_lr_ratio``·lr (docs/paper.md#pretraining-grid); loss is
next-token cross-entropy, the metric validation perplexity exp(mean token NLL). Exactly ``steps`` updates
(docs/runs.md#exact-steps); a rerun resumes from the newest good checkpoint of its own fingerprint; a stop signal
saves a checkpoint and ends with an error. Configs: ``pipeline.train.setup``; Levanter changes:
``pipeline.train.trainer``."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.artifacts import atomic_write_yaml, read_metrics, read_run_spec, resume_metrics
from pipeline.config import FinetuneSpec, RunSpec
from pipeline.config.specs import to_dict
from pipeline.execution.errors import RunStopped
from pipeline.execution.phases import mark_phase
from pipeline.execution.stop_signals import StopSignals
from pipeline.train.checkpoints import prune_checkpoints, resume_or_initialize, write_checksums
from pipeline.train.finetune import resampled_source, trainable_filter
from pipeline.train.identity import RunIdentity, claim_run_folder, source_fingerprint, stored_fingerprint
from pipeline.train.result import TrainingResult
from pipeline.train.setup import (
    assigned_gpus,
    cycled_training_set,
    data_config,
    evaluation_set,
    optimizer_config,
    require_accelerators,
    trainer_config,
)
from pipeline.train.step_log import StepLog

logger = logging.getLogger(__name__)


class TrainingStoppedError(RunStopped):
    """SIGTERM, SLURM's walltime warning or a cancelled Ray task stopped the run; a checkpoint at the current step
    was saved first."""


@dataclass(frozen=True)
class TrainJob:
    """One training job, handed whole to ``train_run`` as Levanter's ``TrainLmConfig`` goes to its trainer: the ``spec``
    (its run folder's ``config.yaml``) at ``seq_len``, its folders, ``build_model(vocab_axis, key)``, its ``identity``
    (``pipeline.train.identity``), and ``build_in_jit``, ``trainable`` and ``eval_split`` (``train_run``)."""

    spec: RunSpec | FinetuneSpec
    seq_len: int
    run_dir: Path
    cache_dir: Path
    tokenizer_dir: Path
    build_model: Callable[[Any, Any], Any]
    identity: RunIdentity
    build_in_jit: bool = True
    trainable: Callable[[Any], Any] | None = None
    eval_split: str = "validation"

    @classmethod
    def pretraining(
        cls,
        spec: RunSpec,
        run_dir: str | Path,
        cache_dir: str | Path,
        tokenizer_dir: str | Path,
        *,
        preflight: bool = False,
    ) -> TrainJob:
        """A fresh model of the run's family and dimensions, initialised by its ``init`` scheme
        (``pipeline.models.init``); ``preflight``: a preflight job's bounded spec (``RunIdentity.of``)."""
        from pipeline.models import build_initialised
        from pipeline.models.checkpoint import run_model_config

        model = run_model_config(spec)
        cache, tokenizer = Path(cache_dir), Path(tokenizer_dir)
        identity = RunIdentity.of(spec, tokenizer, cache, preflight=preflight)

        def build(vocab, key):
            return build_initialised(model, vocab, key=key, init=spec.model.init)

        return cls(spec, spec.model.seq_len, Path(run_dir), cache, tokenizer, build, identity)

    @classmethod
    def finetuning(
        cls,
        spec: FinetuneSpec,
        run_dir: str | Path,
        source_dir: str | Path,
        cache_dir: str | Path,
        tokenizer_dir: str | Path,
        *,
        preflight: bool = False,
    ) -> TrainJob:
        """The source's final checkpoint resampled at its ``seq_len``, built eagerly; its identity includes the
        source's (``summary.json``, or for a preflight source its checkpoints' fingerprint)."""
        source, cache, tokenizer = Path(source_dir), Path(cache_dir), Path(tokenizer_dir)
        source_identity = stored_fingerprint(source / "checkpoints") if preflight else source_fingerprint(source)
        return cls(
            spec,
            read_run_spec(source).model.seq_len,
            Path(run_dir),
            cache,
            tokenizer,
            lambda vocab, key: resampled_source(spec, source, vocab.size, key),
            RunIdentity.of(spec, tokenizer, cache, source_identity, preflight=preflight),
            build_in_jit=False,
            trainable=trainable_filter(spec),
            eval_split=spec.eval_split,
        )


def train_run(job: TrainJob) -> TrainingResult:
    """Write ``job``'s run folder (``config.yaml``; checkpoints claimed for its identity), train ``job.build_model``
    for exactly ``spec.train.steps`` updates (resuming when it can), log to ``metrics.jsonl`` and evaluate on the
    whole ``eval_split``. ``build_in_jit``: a fresh model is initialised sharded inside jit; otherwise
    ``build_model`` runs eagerly (it may read a source checkpoint). A fresh run first evaluates the untrained model
    (``initial_val_loss``)."""
    # A job stop signal (``pipeline.execution.stop_signals``) only names itself in ``stop``, read by a per-step hook
    # (a signal handler must not touch JAX). Ray delivers ``ray.cancel`` of a running task as SIGINT to its worker;
    # SLURM's walltime warning (SIGURG) reaches the worker directly, as every process of the job. From the start: a
    # stop asked for during set-up is taken after the first step.
    with StopSignals() as stop:
        return _train_run(job, stop)


def _train_run(job: TrainJob, stop: StopSignals) -> TrainingResult:
    import equinox as eqx
    import jax
    import jax.random as jrandom
    import levanter
    from haliax import Axis
    from haliax.partitioning import round_axis_for_partitioning
    from levanter.models.lm_model import compute_next_token_loss
    from levanter.utils.jax_utils import parameter_count

    from pipeline.train.trainer import UndonatedTrainer, after_each_save, held_out_evaluators, trainer_checkpointer

    logging.getLogger("pipeline").setLevel(logging.INFO)
    run_id, train, run_dir = job.spec.run_id, job.spec.train, job.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_yaml(run_dir / "config.yaml", to_dict(job.spec))
    mark_phase("setup")
    gpus = assigned_gpus()
    require_accelerators(gpus)
    checkpoints = run_dir / "checkpoints"
    claim_run_folder(run_dir, job.identity)
    data = data_config(job.cache_dir, job.tokenizer_dir)
    tokenizer = data.the_tokenizer
    config = trainer_config(run_id, train, run_dir, require_accelerator=gpus > 0, identity=job.identity)
    optimizer = optimizer_config(train)
    levanter.initialize(config)

    with UndonatedTrainer(config, optimizer.build(train.steps), compute_next_token_loss) as trainer:
        data_key, model_key, training_key = jrandom.split(jrandom.PRNGKey(train.seed), 3)
        vocab = round_axis_for_partitioning(Axis("vocab", len(tokenizer)), trainer.parameter_axis_mapping)
        if job.build_in_jit:
            source = {"model_init": jax.tree_util.Partial(job.build_model, vocab, model_key)}  # the key: an argument
        else:
            source = {"model": job.build_model(vocab, model_key)}
        is_trainable = True
        if job.trainable is not None:  # a fresh model's shapes only when asked for: a trace of the whole model
            model = source["model"] if "model" in source else eqx.filter_eval_shape(job.build_model, vocab, model_key)
            is_trainable = job.trainable(model)
        Pos = Axis("position", job.seq_len)
        training_set, train_examples = cycled_training_set(
            data, Pos, config.batch_schedule, train, data_key, job.cache_dir, run_id
        )
        held_out = evaluation_set(data, Pos, job.cache_dir, job.eval_split)
        state = resume_or_initialize(
            lambda: trainer.initial_state(training_key, is_trainable=is_trainable, **source), checkpoints
        )
        resumed_from = int(state.step)
        if resumed_from:
            logger.info("Resuming %s from checkpoint at step %d", run_id, resumed_from)
        n_params = parameter_count(state.model)
        n_trainable = parameter_count(state.trainable_model)
        resume_metrics(run_dir / "metrics.jsonl", resumed_from)
        if resumed_from < train.steps:
            accumulation = train.batch_size // (config.per_device_parallelism * config.data_axis_size)
            split = {"micro_batch": config.per_device_parallelism, "gradient_accumulation": accumulation}
            levanter.tracker.log(split, step=resumed_from)
        tokens_per_step = train.batch_size * job.seq_len
        periodic_eval, final_eval = held_out_evaluators(
            trainer, held_out, job.eval_split, tokenizer, train.eval_batches
        )
        last_eval = {}
        checkpointer = trainer_checkpointer(trainer)
        after_each_save(checkpointer, write_checksums)

        def evaluate(model, updates: int) -> float:
            mark_phase("eval")
            loss = periodic_eval.evaluate(model).micro_avg_loss
            levanter.tracker.log({"eval_loss": loss, "eval_ppl": math.exp(loss)}, step=updates)
            logger.info(
                "%s after %d updates: %s loss %.4f ppl %.2f", run_id, updates, job.eval_split, loss, math.exp(loss)
            )
            mark_phase("train")
            return loss

        initial_loss = None if resumed_from else evaluate(state.eval_model, 0)

        def log_eval(info) -> None:
            updates = info.step + 1
            if updates == last_eval.get("updates") or (updates % train.eval_every and updates != train.steps):
                return
            last_eval["updates"] = updates
            evaluate(info.eval_model, updates)

        def keep_newest_checkpoints(info) -> None:
            if info.step % train.checkpoint_every == 0:
                prune_checkpoints(checkpoints, train.keep_checkpoints_every)

        def stop_when_asked(info) -> None:
            if stop.signal_name is None:
                return
            checkpointer.on_step(info, force=True)
            checkpointer.wait_until_finished()
            trainer.tracker.finish()
            raise TrainingStoppedError(
                f"{run_id}: stopped on request ({stop.signal_name}: SIGTERM to the job, SLURM's walltime warning, or "
                f"its Ray task cancelled) "
                f"after {info.step + 1} of {train.steps} updates; a checkpoint was saved in {checkpoints}, rerun "
                f"the job to resume from it."
            )

        step_log = StepLog(run_id, train.steps, tokens_per_step, resumed_from)
        for hook in (step_log, log_eval, keep_newest_checkpoints, stop_when_asked):
            trainer.add_hook(hook, every=1)
        loader = trainer.data_loader(training_set).iter_from_step(resumed_from)
        if resumed_from < train.steps:
            mark_phase("compile")
            last = trainer.train(state, loader)
            steps_done = int(last.state.step)
            if steps_done != train.steps:
                raise ValueError(
                    f"{run_id}: the data loader ended after {steps_done} of {train.steps} updates "
                    f"({train_examples} training examples, batch {train.batch_size}); no summary was written."
                )
            mark_phase("checkpoint")
            checkpointer.on_step(last, force=True)
            checkpointer.wait_until_finished()
            model = last.eval_model
        else:
            steps_done = resumed_from
            model = state.eval_model
        trainer.tracker.finish()
        prune_checkpoints(checkpoints, train.keep_checkpoints_every, keep=1)

        mark_phase("final-eval")
        final = final_eval.evaluate(model)
        mark_phase("write")

    return TrainingResult.from_metrics(
        read_metrics(run_dir / "metrics.jsonl"),
        initial_val_loss=initial_loss,
        parameters=int(n_params),
        trainable_parameters=int(n_trainable),
        resumed_from_step=resumed_from,
        steps_done=steps_done,
        tokens_seen=steps_done * tokens_per_step,
        passes=steps_done * train.batch_size / train_examples,
        fingerprint=job.identity.fingerprint,
        eval_split=job.eval_split,
        val_loss=final.micro_avg_loss,
        val_bpb=final.micro_bpb,
        devices=[str(d) for d in jax.devices()],
    )
