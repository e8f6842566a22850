"""The Levanter set-up of one run: data, trainer and optimizer configs, the cycled training set, the held-out split
and the devices it must see."""

import logging
import math
import os
from datetime import timedelta
from pathlib import Path

from pipeline.config import REPO_ROOT, TrainSpec
from pipeline.train.identity import RunIdentity

logger = logging.getLogger(__name__)


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
            f"(`PIPELINE_ACCELERATOR=cuda bash workflow/scripts/setup_env.sh`), or run with --gpus 0."
        )


def assigned_gpus() -> int:
    """GPUs Ray assigned to the current task (0 outside a Ray task)."""
    import ray

    if not ray.is_initialized():
        return 0
    return len(ray.get_runtime_context().get_accelerator_ids().get("GPU", []))


def data_config(cache_dir: str | Path, tokenizer_dir: str | Path):
    """Levanter's single-dataset config over a prebuilt token cache (``<cache_dir>/{train,validation}``)."""
    from levanter.data.text import UrlSingleDatasetLMConfig

    return UrlSingleDatasetLMConfig(
        cache_dir=str(cache_dir),
        tokenizer=str(tokenizer_dir),
        train_urls=[],
        validation_urls=[],
        shuffle=True,
        permutation_type="feistel",
    )


def cycled_training_set(data, Pos, batch_schedule, train: TrainSpec, data_key, cache_dir: Path, run_id: str):
    """``(dataset, examples)``: the ``examples`` shuffled examples of the train split of ``data``, repeated
    ceil(steps · batch / examples) times with one permutation, so exactly ``steps`` updates exist
    (docs/paper.md#exact-steps); a split without one example is an error."""
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
    return EpochDataset(one_pass, max_epochs=math.ceil(passes)), examples


PERSISTENT_CACHE_EVERY_PROGRAM = {"jax_persistent_cache_min_compile_time_secs": 0.0}
"""JAX writes a program to its persistent compilation cache only if it took over 1 s to compile (its default); a
tiny job's evaluation step (0.5-1 s) was compiled again by every job of its shape. Every program is kept."""


def trainer_config(
    run_id: str,
    train: TrainSpec,
    run_dir: Path,
    *,
    require_accelerator: bool = False,
    identity: RunIdentity | None = None,
):
    """Levanter ``TrainerConfig`` for one run: local checkpoints, ``PIPELINE_TRACKERS``'s trackers, no Ray/JAX
    auto-start, and no gradient-norm watch (its jit hook compiles a second train step)."""
    import jmp
    from levanter.callbacks.watch import WatchConfig
    from levanter.checkpoint import CheckpointerConfig
    from levanter.distributed import DistributedConfig, RayConfig
    from levanter.trainer import DEFAULT_JAX_CONFIG, TrainerConfig

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
        jax_config={**DEFAULT_JAX_CONFIG, **PERSISTENT_CACHE_EVERY_PROGRAM},
        jax_compilation_cache_dir=os.environ.get("JAX_COMPILATION_CACHE_DIR", str(REPO_ROOT / ".cache" / "jax")),
    )


def optimizer_config(train: TrainSpec):
    from pipeline.train.decay import MaskedAdamConfig

    return MaskedAdamConfig(
        learning_rate=train.lr,
        weight_decay=train.weight_decay,
        beta1=train.beta1,
        beta2=train.beta2,
        epsilon=train.epsilon,
        warmup=train.warmup_fraction,
        min_lr_ratio=train.min_lr_ratio,
        lr_schedule="cosine",
        decay_mask=train.decay_mask,
    )


def evaluation_set(data, Pos, cache_dir: Path, split: str):
    """The token cache's ``split`` (validation, or a fine-tune's test split: docs/paper.md#fine-tune-test-split) as
    examples."""
    from levanter.data.text import dataset_for_format, load_lm_dataset_cache

    if not (cache_dir / split / "shard_ledger.json").is_file():
        raise FileNotFoundError(
            f"{cache_dir / split}: the token cache has no '{split}' split; set test_split: true "
            f"in its dataset's source (if the dataset has a test split) and rebuild the cache, "
            f"or set fidelity.eval_split: validation."
        )
    cache = load_lm_dataset_cache(str(cache_dir / split), data.format, data.the_tokenizer, data.enforce_eos)
    return dataset_for_format(
        data.format, Pos, cache, eos_id=data.the_tokenizer.eos_token_id, ignore_index=data.ignore_token_id
    )
