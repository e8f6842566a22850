"""Pretraining on Levanter's Trainer (one function of one ``RunSpec``).

AdamW with linear warm-up over ``warmup_fraction`` of the steps then cosine decay to
``min_lr_ratio``·lr (experiment-facts §3); the loss is the next-token cross-entropy and the reported
metric is validation perplexity exp(mean token NLL) over the whole validation split. Checkpoints go to
``<run_dir>/checkpoints`` every ``checkpoint_every`` steps and at the end; a rerun after a kill resumes
from the newest one (Levanter restores model, optimizer, step and PRNG state, and the data loader
restarts at that step).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from pipeline.artifacts import MetricsLog, atomic_write_json, atomic_write_yaml, provenance
from pipeline.config import REPO_ROOT, RunSpec
from pipeline.models.checkpoint import run_model_config

logger = logging.getLogger(__name__)


class NonFiniteLossError(RuntimeError):
    """Training produced a NaN or infinite loss; the run stops and says at which step."""


def data_config(cache_dir: Path, tokenizer_dir: Path, *, shuffle: bool = True):
    """Levanter's single-dataset config over a prebuilt token cache (``<cache_dir>/{train,validation}``)."""
    from levanter.data.text import UrlSingleDatasetLMConfig

    return UrlSingleDatasetLMConfig(cache_dir=str(cache_dir), tokenizer=str(tokenizer_dir), train_urls=[],
                                    validation_urls=[], shuffle=shuffle, permutation_type="feistel")


def trainer_config(spec: RunSpec, run_dir: Path):
    """Levanter ``TrainerConfig`` for one run: local checkpoints, no online tracker, no Ray/JAX auto-start."""
    import jmp
    from levanter.checkpoint import CheckpointerConfig
    from levanter.distributed import DistributedConfig, RayConfig
    from levanter.tracker import NoopConfig
    from levanter.trainer import TrainerConfig

    train = spec.train
    return TrainerConfig(
        seed=train.seed,
        mp=jmp.get_policy(train.mixed_precision),
        tracker=NoopConfig(),
        log_dir=run_dir / "logs",
        id=spec.run_id,
        train_batch_size=train.batch_size,
        num_train_steps=train.steps,
        steps_per_eval=train.eval_every,
        max_eval_batches=train.eval_batches,
        checkpointer=CheckpointerConfig(
            base_path=str(run_dir / "checkpoints"),
            append_run_id_to_base_path=False,
            save_interval=timedelta(minutes=30),
            keep=[{"every": train.checkpoint_every}],
        ),
        ray=RayConfig(auto_start_cluster=False),
        distributed=DistributedConfig(initialize_jax_distributed=False),
        require_accelerator=False,
        log_jaxprs=False,
        log_xla_hlo=False,
        jax_compilation_cache_dir=os.environ.get("JAX_COMPILATION_CACHE_DIR", str(REPO_ROOT / ".cache" / "jax")),
    )


def optimizer_config(spec: RunSpec):
    from levanter.optim import AdamConfig

    train = spec.train
    return AdamConfig(learning_rate=train.lr, weight_decay=train.weight_decay, beta1=train.beta1,
                      beta2=train.beta2, epsilon=train.epsilon, warmup=train.warmup_fraction,
                      min_lr_ratio=train.min_lr_ratio, lr_schedule="cosine")


def validation_evaluator(trainer, dataset, tokenizer, max_batches: int | None):
    """Levanter's ``TaggedEvaluator`` over the validation split (all of it when ``max_batches`` is None)."""
    from levanter.eval import TaggedEvaluator

    eval_batch = trainer.config.EvalBatch
    max_examples = None if max_batches is None else max_batches * eval_batch.size
    return TaggedEvaluator(eval_batch, [(dataset, ["validation"])], tokenizer, trainer.device_mesh,
                           trainer.compute_axis_mapping, max_examples, mp=trainer.mp)


def trainer_checkpointer(trainer):
    """The ``Checkpointer`` the Trainer registered as a hook: its final save must be forced by hand, because
    Levanter wraps it in a ``LambdaCallback`` that drops ``force`` (no checkpoint at the last step otherwise)."""
    from levanter.checkpoint import Checkpointer

    for hook in trainer.hooks.hooks:
        owner = getattr(getattr(hook.fn, "fn", None), "__self__", None)
        if isinstance(owner, Checkpointer):
            return owner
    raise RuntimeError("Levanter's Trainer registered no Checkpointer hook; cannot save the final checkpoint.")


def pretrain(spec_json: str, run_dir: str, cache_dir: str, tokenizer_dir: str) -> dict[str, Any]:
    """Train one run to ``spec.train.steps`` (resuming if checkpoints exist) and write its run folder."""
    import jax
    import jax.random as jrandom
    import levanter
    from haliax import Axis
    from haliax.partitioning import round_axis_for_partitioning
    from levanter.models.lm_model import compute_next_token_loss
    from levanter.trainer import Trainer
    from levanter.utils.jax_utils import parameter_count

    started = time.time()
    logging.getLogger("pipeline").setLevel(logging.INFO)
    spec = RunSpec.from_json(spec_json)
    run_path = Path(run_dir)
    run_path.mkdir(parents=True, exist_ok=True)
    atomic_write_yaml(run_path / "config.yaml", dataclasses.asdict(spec))

    model_cfg = run_model_config(spec)
    data = data_config(Path(cache_dir), Path(tokenizer_dir))
    tokenizer = data.the_tokenizer
    config = trainer_config(spec, run_path)
    optimizer = optimizer_config(spec)
    schedule = optimizer.lr_scheduler(spec.train.steps)
    levanter.initialize(config)

    with Trainer(config, optimizer.build(spec.train.steps), compute_next_token_loss) as trainer:
        data_key, model_key, training_key = jrandom.split(jrandom.PRNGKey(spec.train.seed), 3)
        vocab = round_axis_for_partitioning(Axis("vocab", len(tokenizer)), trainer.parameter_axis_mapping)
        train_set = data.train_set(model_cfg.Pos, config.batch_schedule, key=data_key)
        validation_set = data.validation_sets(model_cfg.Pos)[""]
        state = trainer.initial_state(training_key, model_init=lambda: model_cfg.build(vocab, key=model_key))
        resumed_from = int(state.step)
        if resumed_from:
            logger.info("Resuming %s from checkpoint at step %d", spec.run_id, resumed_from)
        n_params = parameter_count(state.model)
        metrics = MetricsLog(run_path / "metrics.jsonl", resume_step=resumed_from)
        tokens_per_step = spec.train.batch_size * spec.model.seq_len
        periodic_eval = validation_evaluator(trainer, validation_set, tokenizer, spec.train.eval_batches)
        clock = {"start": time.time(), "start_step": resumed_from}

        def log_step(info) -> None:
            if info.step == clock.get("last_logged"):
                return
            clock["last_logged"] = info.step
            loss = float(info.loss)
            if not math.isfinite(loss):
                raise NonFiniteLossError(f"{spec.run_id}: training loss became {loss} at step {info.step}; "
                                         f"the run was stopped (lower lr or check the data).")
            done = info.step + 1 - clock["start_step"]
            elapsed = time.time() - clock["start"]
            eta = elapsed / done * (spec.train.steps - info.step - 1)
            record = {"step": info.step, "loss": loss, "lr": float(schedule(info.step)),
                      "tokens_per_s": tokens_per_step / info.step_duration, "step_s": info.step_duration}
            metrics.write(record)
            if info.step % 10 == 0 or info.step + 1 == spec.train.steps:
                logger.info("%s step %d/%d loss %.4f lr %.2e %.0f tok/s ETA %.0fs", spec.run_id, info.step + 1,
                            spec.train.steps, loss, record["lr"], record["tokens_per_s"], eta)

        def log_eval(info) -> None:
            if info.step == clock.get("last_eval"):
                return
            clock["last_eval"] = info.step
            loss = periodic_eval.evaluate(info.eval_model).micro_avg_loss
            metrics.write({"step": info.step, "eval_loss": loss, "eval_ppl": math.exp(loss)})
            logger.info("%s step %d validation loss %.4f ppl %.2f", spec.run_id, info.step + 1, loss,
                        math.exp(loss))

        trainer.add_hook(log_step, every=1)
        trainer.add_hook(log_eval, every=spec.train.eval_every)
        loader = trainer.data_loader(train_set).iter_from_step(resumed_from)
        if resumed_from < spec.train.steps:
            last = trainer.train(state, loader)
            checkpointer = trainer_checkpointer(trainer)
            checkpointer.on_step(last, force=True)
            checkpointer.wait_until_finished()
            model = last.eval_model
        else:
            model = state.eval_model
        metrics.close()

        final = validation_evaluator(trainer, validation_set, tokenizer, None).evaluate(model)
        devices = [str(d) for d in jax.devices()]

    train_records = [r for r in map(_json_line, (run_path / "metrics.jsonl").read_text().splitlines()) if "loss" in r]
    throughput = [r["tokens_per_s"] for r in train_records[1:]]
    summary = {
        "run_id": spec.run_id,
        "preset": spec.preset,
        "group": spec.group,
        "family": spec.model.family,
        "dataset": spec.dataset,
        "size": spec.size,
        "role": spec.role,
        "ablation": spec.ablation,
        "parameters": int(n_params),
        "steps": spec.train.steps,
        "tokens_seen": spec.train.steps * tokens_per_step,
        "final_train_loss": train_records[-1]["loss"] if train_records else None,
        "val_loss": final.micro_avg_loss,
        "val_ppl": math.exp(final.micro_avg_loss),
        "val_bpb": final.micro_bpb,
        "mean_tokens_per_s": sum(throughput) / len(throughput) if throughput else None,
        "resumed_from_step": resumed_from,
    }
    atomic_write_json(run_path / "provenance.json", provenance(started, devices))
    atomic_write_json(run_path / "summary.json", summary)
    return summary


def _json_line(line: str) -> dict:
    import json

    return json.loads(line) if line.strip() else {}
