"""The Levanter training loop shared by pretraining and fine-tuning.

AdamW with linear warm-up over ``warmup_fraction`` of the steps then cosine decay to ``min_lr_ratio``·lr
(docs/paper.md#pretraining-grid); the loss is the next-token cross-entropy and the reported metric is validation
perplexity exp(mean token NLL). Training takes exactly ``steps`` updates: the shuffled training set is cycled (the same
permutation every pass) as the reference loader does (docs/paper.md#exact-steps), and a run that ends short is an
error. Checkpoints go to ``<run_dir>/checkpoints`` every ``checkpoint_every`` steps and at the end; only the
newest complete one is kept (plus every ``keep_checkpoints_every``-th when the preset asks). A rerun resumes from
the newest one only if it was trained under the same run fingerprint (``pipeline.train.identity``); Levanter
restores the trainable parameters, optimizer, step and PRNG state, and the data loader restarts at that step.
SIGTERM (SLURM's warning before a kill) saves a checkpoint at the current step and stops the run with an error.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from pipeline.artifacts import atomic_write_json, provenance, read_metrics, resume_metrics
from pipeline.config import REPO_ROOT, TrainSpec
from pipeline.errors import RunStopped
from pipeline.phases import mark_phase
from pipeline.train.identity import RunIdentity, claim_run_folder

logger = logging.getLogger(__name__)


class NonFiniteLossError(ValueError):
    """Training produced a NaN or infinite loss; the run stops and says at which step (Levanter's own
    ``crash_on_nan`` is off so that this sentence, not a bare "Loss is NaN", reaches the user)."""


class TrainingEndedShortError(ValueError):
    """The data loader ran out before ``steps`` updates; no summary is written for a run that did not happen."""


class TrainingStoppedError(RunStopped):
    """SIGTERM (or a cancelled Ray task) stopped the run; a checkpoint at the current step was saved first."""


class AcceleratorError(ValueError):
    """The job was given accelerators that JAX does not see (e.g. a CPU-only jaxlib on a GPU node)."""


def require_accelerators(count: int) -> None:
    """Fail before training when JAX sees fewer than ``count`` accelerators (GPU/TPU devices)."""
    import jax

    if count <= 0:
        return
    accelerators = [device for device in jax.devices() if device.platform != "cpu"]
    if len(accelerators) < count:
        raise AcceleratorError(
            f"the job was given {count} GPU(s) but JAX (jaxlib {jax.__version__}, backend "
            f"{jax.default_backend()}) sees {len(accelerators)} accelerator(s); if the venv is the CPU one, build the "
            f"CUDA venv on the login node with PIPELINE_ACCELERATOR=cuda on the shared filesystem "
            f"(`PIPELINE_ACCELERATOR=cuda bash workflow/scripts/setup_env.sh`), or run with --gpus 0.")


def assigned_gpus() -> int:
    """GPUs Ray assigned to the current task (0 outside a Ray task)."""
    import ray

    if not ray.is_initialized():
        return 0
    return len(ray.get_runtime_context().get_accelerator_ids().get("GPU", []))


class StopRequest:
    """SIGTERM/SIGINT while training → a flag read by a per-step hook (the handler itself must not touch JAX).
    Ray delivers ``ray.cancel`` of a running task as SIGINT to its worker; SLURM sends SIGTERM before a kill."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self):
        self.signal_name: str | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for number in self.SIGNALS:
                self._previous[number] = signal.signal(number, self._handle)
        return self

    def _handle(self, number, frame) -> None:
        self.signal_name = signal.Signals(number).name

    def __exit__(self, *exc) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)


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


def data_config(cache_dir: Path, tokenizer_dir: Path, *, shuffle: bool = True):
    """Levanter's single-dataset config over a prebuilt token cache (``<cache_dir>/{train,validation}``)."""
    from levanter.data.text import UrlSingleDatasetLMConfig

    return UrlSingleDatasetLMConfig(cache_dir=str(cache_dir), tokenizer=str(tokenizer_dir), train_urls=[],
                                    validation_urls=[], shuffle=shuffle, permutation_type="feistel")


def trainer_config(run_id: str, train: TrainSpec, run_dir: Path, *, require_accelerator: bool = False,
                   identity: RunIdentity | None = None):
    """Levanter ``TrainerConfig`` for one run: local checkpoints, the trackers of ``PIPELINE_TRACKERS`` for a run of
    ``identity`` (``pipeline.train.tracking``; without one, ``metrics.jsonl`` only), no Ray/JAX auto-start, and no
    gradient/parameter-norm watch (its jit hook compiles a second train step)."""
    import jmp
    from levanter.callbacks.watch import WatchConfig
    from levanter.checkpoint import CheckpointerConfig
    from levanter.distributed import DistributedConfig, RayConfig
    from levanter.trainer import TrainerConfig

    from pipeline.train.tracking import configured_trackers, tracker_configs

    return TrainerConfig(
        seed=train.seed,
        mp=jmp.get_policy(train.mixed_precision),
        tracker=tracker_configs(run_dir, configured_trackers(), identity),
        log_dir=run_dir / "logs",
        id=run_id,
        train_batch_size=train.batch_size,
        per_device_parallelism=-1 if train.micro_batch_size is None else train.micro_batch_size,
        num_train_steps=train.steps,
        steps_per_eval=train.eval_every,
        max_eval_batches=train.eval_batches,
        checkpointer=CheckpointerConfig(
            base_path=str(run_dir / "checkpoints"),
            append_run_id_to_base_path=False,
            save_interval=timedelta(minutes=30),
            keep=[{"every": train.checkpoint_every}],
        ),
        require_accelerator=require_accelerator,
        ray=RayConfig(auto_start_cluster=False),
        distributed=DistributedConfig(initialize_jax_distributed=False),
        crash_on_nan=False,
        crash_on_inf=False,
        log_jaxprs=False,
        log_xla_hlo=False,
        watch=WatchConfig(watch_targets=[]),
        jax_compilation_cache_dir=os.environ.get("JAX_COMPILATION_CACHE_DIR", str(REPO_ROOT / ".cache" / "jax")),
    )


def optimizer_config(train: TrainSpec):
    from pipeline.train.decay import MaskedAdamConfig

    return MaskedAdamConfig(learning_rate=train.lr, weight_decay=train.weight_decay, beta1=train.beta1,
                            beta2=train.beta2, epsilon=train.epsilon, warmup=train.warmup_fraction,
                            min_lr_ratio=train.min_lr_ratio, lr_schedule="cosine", decay_mask=train.decay_mask)


def evaluation_set(data, Pos, cache_dir: Path, split: str):
    """The token cache's ``split`` (validation, or a fine-tune's test split: docs/paper.md#fine-tune-test-split) as
    examples."""
    from levanter.data.text import dataset_for_format, load_lm_dataset_cache

    if not (cache_dir / split / "shard_ledger.json").is_file():
        raise FileNotFoundError(f"{cache_dir / split}: the token cache has no '{split}' split; set test_split: true "
                                f"in its dataset's source (if the dataset has a test split) and rebuild the cache, "
                                f"or set fidelity.eval_split: validation.")
    cache = load_lm_dataset_cache(str(cache_dir / split), data.format, data.the_tokenizer, data.enforce_eos)
    return dataset_for_format(data.format, Pos, cache, eos_id=data.the_tokenizer.eos_token_id,
                              ignore_index=data.ignore_token_id)


def held_out_evaluators(trainer, dataset, split: str, tokenizer, max_batches: int | None):
    """Levanter ``TaggedEvaluator``s over one held-out split: the periodic one (its first ``max_batches`` batches;
    all of it when None) and the final one (all of it), sharing one jitted evaluation step that every batch of every
    evaluation hits.

    Levanter 1.2 compiles that step up to four times per run otherwise: each ``TaggedEvaluator`` jits its own
    ``accum_for_batch`` (the two close over the same tags, tokenizer bytes, precision and axis mapping, so the final
    one can take the periodic one's), and ``evaluate`` starts its running means from bare scalars that the step
    returns as axis-less ``NamedArray``s, a second pytree that traces and compiles the step again on the second
    batch (``named_running_means``). Each trace and compile costs 0.8–1.3 s of a tiny job's CPU."""
    from levanter.eval import TaggedEvaluator

    eval_batch = trainer.config.EvalBatch
    periodic, final = (TaggedEvaluator(eval_batch, [(dataset, [split])], tokenizer, trainer.device_mesh,
                                       trainer.compute_axis_mapping, max_examples, mp=trainer.mp)
                       for max_examples in (None if max_batches is None else max_batches * eval_batch.size, None))
    accumulate = periodic.accum_for_batch

    def accumulate_named(model, state, batch, tags):
        return accumulate(model, named_running_means(state), batch, tags)

    periodic.accum_for_batch = final.accum_for_batch = accumulate_named
    return periodic, final


def named_running_means(state):
    """``state`` with every bare array leaf as an axis-less ``NamedArray`` (the form Levanter's step returns)."""
    import haliax as hax
    import jax

    return jax.tree.map(lambda leaf: leaf if isinstance(leaf, hax.NamedArray) else hax.named(leaf, ()), state,
                        is_leaf=lambda leaf: isinstance(leaf, hax.NamedArray))


def checkpoint_step(path: Path) -> int:
    return int(path.name.removeprefix("step-"))


def check_checkpoint_metadata(checkpoints: Path) -> None:
    """Every ``step-N/metadata.json`` must be readable JSON (Levanter's resume reads them all and would fail with
    a bare JSON error naming no file); a torn one is named with what to do."""
    for metadata in sorted(checkpoints.glob("step-*/metadata.json")):
        try:
            json.loads(metadata.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ValueError(f"{metadata}: empty or corrupt checkpoint metadata (a save was interrupted); delete "
                             f"{metadata.parent} and rerun to resume from the previous checkpoint.") from None


def prune_checkpoints(checkpoints: Path, keep_every: int | None) -> None:
    """Delete every checkpoint older than the newest complete one (``metadata.json`` written), except the steps
    that are multiples of ``keep_every``; a checkpoint still being written (newer, no metadata) is left alone."""
    steps = [path for path in checkpoints.glob("step-*") if path.is_dir()]
    complete = [path for path in steps if (path / "metadata.json").is_file()]
    if not complete:
        return
    newest = max(checkpoint_step(path) for path in complete)
    for path in steps:
        step = checkpoint_step(path)
        if step < newest and not (keep_every and step % keep_every == 0):
            shutil.rmtree(path, ignore_errors=True)


def count_examples(dataset) -> int:
    """Number of seq_len examples in a (finite) Levanter training dataset."""
    return len(dataset.as_sync_dataset())


def trainer_checkpointer(trainer):
    """The ``Checkpointer`` the Trainer registered as a hook: its final save must be forced by hand, because
    Levanter wraps it in a ``LambdaCallback`` that drops ``force`` (no checkpoint at the last step otherwise)."""
    from levanter.checkpoint import Checkpointer

    for hook in trainer.hooks.hooks:
        owner = getattr(getattr(hook.fn, "fn", None), "__self__", None)
        if isinstance(owner, Checkpointer):
            return owner
    raise RuntimeError("Levanter's Trainer registered no Checkpointer hook; cannot save the final checkpoint.")


def train_run(run_id: str, train: TrainSpec, seq_len: int, run_dir: Path, cache_dir: Path, tokenizer_dir: Path,
              build_model: Callable[[Any, Any], Any], identity: RunIdentity, *, build_in_jit: bool = True,
              trainable: Callable[[Any], Any] | None = None, eval_split: str = "validation") -> TrainingResult:
    """Train ``build_model(vocab_axis, key)`` for exactly ``train.steps`` updates on the cache's train split
    (resuming from the newest checkpoint of the same ``identity``), logging to ``<run_dir>/metrics.jsonl``, and
    evaluate on the whole ``eval_split`` (validation; fine-tunes: the target's test split where it has one).

    ``build_in_jit``: a fresh initialisation is built by Levanter inside jit (sharded, never materialised whole);
    otherwise ``build_model`` runs eagerly (it may read a source checkpoint) and Levanter takes the result.
    ``trainable(model)`` gives Levanter's ``is_trainable`` filter tree (default: every parameter). A fresh run
    first evaluates the untrained model (``initial_val_loss``; the step-0 point of the curve).
    """
    import equinox as eqx
    import jax
    import jax.random as jrandom
    import levanter
    from haliax import Axis
    from haliax.partitioning import round_axis_for_partitioning
    from levanter.data.dataset import EpochDataset
    from levanter.models.lm_model import compute_next_token_loss
    from levanter.utils.jax_utils import parameter_count

    from pipeline.train.trainer import UndonatedTrainer

    mark_phase("setup")
    gpus = assigned_gpus()
    require_accelerators(gpus)
    checkpoints = run_dir / "checkpoints"
    claim_run_folder(run_dir, identity)
    check_checkpoint_metadata(checkpoints)
    data = data_config(cache_dir, tokenizer_dir)
    tokenizer = data.the_tokenizer
    config = trainer_config(run_id, train, run_dir, require_accelerator=gpus > 0, identity=identity)
    optimizer = optimizer_config(train)
    schedule = optimizer.lr_scheduler(train.steps)
    levanter.initialize(config)

    with UndonatedTrainer(config, optimizer.build(train.steps), compute_next_token_loss) as trainer, \
            StopRequest() as stop:
        data_key, model_key, training_key = jrandom.split(jrandom.PRNGKey(train.seed), 3)
        vocab = round_axis_for_partitioning(Axis("vocab", len(tokenizer)), trainer.parameter_axis_mapping)
        if build_in_jit:
            source = {"model_init": lambda: build_model(vocab, model_key)}
            skeleton = eqx.filter_eval_shape(build_model, vocab, model_key)
        else:
            source = {"model": build_model(vocab, model_key)}
            skeleton = source["model"]
        is_trainable = True if trainable is None else trainable(skeleton)
        Pos = Axis("position", seq_len)
        one_pass = data.train_set(Pos, config.batch_schedule, key=data_key)
        train_examples = count_examples(one_pass)
        if train_examples == 0:
            raise ValueError(f"{cache_dir / 'train'}: the training split has no example of {seq_len} tokens; "
                             f"use a larger corpus or a shorter seq_len for {run_id}.")
        passes_needed = math.ceil(train.steps * train.batch_size / train_examples)
        train_set = EpochDataset(one_pass, max_epochs=passes_needed)
        logger.info("%s: %d updates × %d examples over %d training examples = %.2f passes", run_id, train.steps,
                    train.batch_size, train_examples, train.steps * train.batch_size / train_examples)
        held_out = evaluation_set(data, Pos, cache_dir, eval_split)
        state = trainer.initial_state(training_key, is_trainable=is_trainable, **source)
        resumed_from = int(state.step)
        if resumed_from:
            logger.info("Resuming %s from checkpoint at step %d", run_id, resumed_from)
        n_params = parameter_count(state.model)
        n_trainable = parameter_count(state.trainable_model)
        resume_metrics(run_dir / "metrics.jsonl", resumed_from)
        if resumed_from < train.steps:
            levanter.tracker.log({"micro_batch": config.per_device_parallelism, "gradient_accumulation":
                                  train.batch_size // (config.per_device_parallelism * config.data_axis_size)},
                                 step=resumed_from)
        tokens_per_step = train.batch_size * seq_len
        periodic_eval, final_eval = held_out_evaluators(trainer, held_out, eval_split, tokenizer, train.eval_batches)
        clock = {"start": time.time(), "start_step": resumed_from}
        checkpointer = trainer_checkpointer(trainer)

        def evaluate(model, updates: int) -> float:
            mark_phase("eval")
            loss = periodic_eval.evaluate(model).micro_avg_loss
            levanter.tracker.log({"eval_loss": loss, "eval_ppl": math.exp(loss)}, step=updates)
            logger.info("%s after %d updates: %s loss %.4f ppl %.2f", run_id, updates, eval_split, loss,
                        math.exp(loss))
            mark_phase("train")
            return loss

        initial_loss = None if resumed_from else evaluate(state.eval_model, 0)

        def log_step(info) -> None:
            if info.step == clock.get("last_logged"):
                return
            clock["last_logged"] = info.step
            if info.step == clock["start_step"]:
                mark_phase("train")
            loss = float(info.loss)
            if not math.isfinite(loss):
                raise NonFiniteLossError(f"{run_id}: training loss became {loss} at step {info.step}; "
                                         f"the run was stopped (lower lr or check the data).")
            done = info.step + 1 - clock["start_step"]
            elapsed = time.time() - clock["start"]
            eta = elapsed / done * (train.steps - info.step - 1)
            record = {"loss": loss, "lr": float(schedule(info.step)),
                      "tokens_per_s": tokens_per_step / info.step_duration, "step_s": info.step_duration}
            levanter.tracker.log(record, step=info.step)
            if info.step % 10 == 0 or info.step + 1 == train.steps:
                logger.info("%s step %d/%d loss %.4f lr %.2e %.0f tok/s ETA %.0fs", run_id, info.step + 1,
                            train.steps, loss, record["lr"], record["tokens_per_s"], eta)

        def log_eval(info) -> None:
            updates = info.step + 1
            if updates == clock.get("last_eval") or (updates % train.eval_every and updates != train.steps):
                return
            clock["last_eval"] = updates
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
                f"{run_id}: stopped on request ({stop.signal_name}: SIGTERM to the job, or its Ray task cancelled) "
                f"after {info.step + 1} of {train.steps} updates; a checkpoint was saved in {checkpoints}, rerun "
                f"the job to resume from it.")

        trainer.add_hook(log_step, every=1)
        trainer.add_hook(log_eval, every=1)
        trainer.add_hook(keep_newest_checkpoints, every=1)
        trainer.add_hook(stop_when_asked, every=1)
        loader = trainer.data_loader(train_set).iter_from_step(resumed_from)
        if resumed_from < train.steps:
            mark_phase("compile")
            last = trainer.train(state, loader)
            steps_done = int(last.state.step)
            if steps_done != train.steps:
                raise TrainingEndedShortError(
                    f"{run_id}: the data loader ended after {steps_done} of {train.steps} updates "
                    f"({train_examples} training examples, batch {train.batch_size}); no summary was written.")
            mark_phase("checkpoint")
            checkpointer.on_step(last, force=True)
            checkpointer.wait_until_finished()
            model = last.eval_model
        else:
            steps_done = resumed_from
            model = state.eval_model
        trainer.tracker.finish()
        prune_checkpoints(checkpoints, train.keep_checkpoints_every)

        mark_phase("final-eval")
        final = final_eval.evaluate(model)
        mark_phase("write")
        devices = [str(d) for d in jax.devices()]

    records = read_metrics(run_dir / "metrics.jsonl")
    train_records = [r for r in records if "loss" in r]
    if initial_loss is None:
        initial_loss = next((r["eval_loss"] for r in records if r.get("step") == 0 and "eval_loss" in r), None)
    throughput = [r["tokens_per_s"] for r in train_records[1:]]
    return TrainingResult(
        parameters=int(n_params),
        trainable_parameters=int(n_trainable),
        resumed_from_step=resumed_from,
        steps_done=steps_done,
        tokens_seen=steps_done * tokens_per_step,
        train_examples=train_examples,
        passes=steps_done * train.batch_size / train_examples,
        fingerprint=identity.fingerprint,
        eval_split=eval_split,
        initial_val_loss=initial_loss,
        val_loss=final.micro_avg_loss,
        val_bpb=final.micro_bpb,
        final_train_loss=train_records[-1]["loss"] if train_records else None,
        mean_tokens_per_s=sum(throughput) / len(throughput) if throughput else None,
        devices=devices,
        micro_batches=[{"from_step": r["step"], "micro_batch": r["micro_batch"],
                        "gradient_accumulation": r["gradient_accumulation"]} for r in records if "micro_batch" in r],
    )

