"""Peak memory of one training step (paper App. D, Fig. 16; docs/experiments.md#analyses): ``steps`` AdamW steps of
the run's model with the loop's own ``Trainer`` on random tokens, recording per device (largest over local devices)
the allocator's ``device_peak_bytes`` (None on CPU), XLA's plan ``compiled_peak_bytes`` = arguments + outputs +
temporaries − donated, and ``host_peak_rss_bytes``. The device peak includes the first step's compilation, as a
training process's does; the plan is compiled after the steps, so that compilation never enters it."""

import logging
import resource
import tempfile
from pathlib import Path
from typing import Any

MEMORY_COLUMNS = [
    "probe_id",
    "family",
    "time_embed_dim",
    "batch_size",
    "seq_len",
    "parameters",
    "num_devices",
    "backend",
    "device_peak_bytes",
    "compiled_peak_bytes",
    "host_peak_rss_bytes",
]


def device_peak_bytes(devices) -> int | None:
    """Largest ``peak_bytes_in_use`` over ``devices``; ``None`` when the backend reports no statistics."""
    peaks = [(device.memory_stats() or {}).get("peak_bytes_in_use") for device in devices]
    return None if any(peak is None for peak in peaks) else max(peaks)


def probe_memory(spec_json: str, tokenizer_dir: str, out_json: str, steps: int) -> dict[str, Any]:
    """Measure the train step of probe ``spec_json`` (a ``RunSpec``) into ``out_json``, JAX's persistent
    compilation cache off (a cached step would skip the compile scratch a first run pays)."""
    import jax
    from levanter.compat.hf_checkpoints import load_tokenizer

    from pipeline.artifacts import atomic_write_json
    from pipeline.config import RunSpec
    from pipeline.train.step_plan import compiled_peak_bytes

    logging.getLogger("pipeline").setLevel(logging.INFO)
    spec = RunSpec.from_json(spec_json)
    cache_enabled = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", False)
    try:
        parameters, losses, measured, plan = _measure_train_step(spec, load_tokenizer(tokenizer_dir), steps)
    finally:
        jax.config.update("jax_enable_compilation_cache", cache_enabled)
    devices = jax.local_devices()
    record = {
        "probe_id": spec.run_id,
        "preset": spec.preset,
        "base_group": spec.group,
        "family": spec.model.family,
        "time_embed_dim": spec.model.time_embed_dim,
        "batch_size": spec.train.batch_size,
        "seq_len": spec.model.seq_len,
        "mixed_precision": spec.train.mixed_precision,
        "parameters": parameters,
        "steps": steps,
        "losses": losses,
        "num_devices": len(devices),
        "backend": jax.default_backend(),
        "devices": [str(device) for device in devices],
        "device_peak_bytes": measured,
        "compiled_peak_bytes": compiled_peak_bytes(plan),
        "compiled_temp_bytes": int(plan.temp_size_in_bytes),
        "host_peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    atomic_write_json(Path(out_json), record)
    logging.getLogger(__name__).info(
        "%s: %d parameters, compiled plan %.3f GiB per device, device peak %s",
        spec.run_id,
        parameters,
        record["compiled_peak_bytes"] / 2**30,
        "n/a" if measured is None else f"{measured / 2**30:.3f} GiB",
    )
    return {key: record[key] for key in MEMORY_COLUMNS}


def _measure_train_step(spec, tokenizer, steps: int):
    """Parameters, losses, allocator peak and compiled plan of ``steps`` train steps of ``spec``'s model on random
    tokens, made into examples as the pretraining loader makes them (end-of-document segments, ignore index)."""
    import haliax as hax
    import jax
    import jax.random as jrandom
    import levanter
    from haliax import Axis
    from haliax.partitioning import round_axis_for_partitioning
    from levanter.models.lm_model import compute_next_token_loss
    from levanter.utils.jax_utils import parameter_count

    from pipeline.models.checkpoint import run_model_config
    from pipeline.train.setup import optimizer_config, trainer_config
    from pipeline.train.step_plan import causal_examples
    from pipeline.train.trainer import UndonatedTrainer

    model_config = run_model_config(spec)
    vocab_size = len(tokenizer)
    with tempfile.TemporaryDirectory(prefix=f"{spec.run_id}-") as scratch:
        config = trainer_config(spec.run_id, spec.train, Path(scratch))
        levanter.initialize(config)
        optimizer = optimizer_config(spec.train).build(spec.train.steps)
        with UndonatedTrainer(config, optimizer, compute_next_token_loss) as trainer:
            model_key, data_key, training_key = jrandom.split(jrandom.PRNGKey(spec.train.seed), 3)
            Vocab = round_axis_for_partitioning(Axis("vocab", vocab_size), trainer.parameter_axis_mapping)
            state = trainer.initial_state(training_key, model_init=lambda: model_config.build(Vocab, key=model_key))
            Pos = Axis("position", spec.model.seq_len)
            tokens = hax.random.randint(data_key, (trainer.TrainBatch, Pos), 0, vocab_size)
            batch = hax.shard(
                causal_examples(tokens, tokenizer.eos_token_id, trainer.TrainBatch), trainer.compute_axis_mapping
            )
            # The function Trainer.train_step runs when no jit hook is due (the loop registers none), without the
            # host-side hooks (checkpointer, trackers), which a probe must not trigger.
            train_step = trainer._jit_train_step_fn_no_hook
            parameters = int(parameter_count(state.model))
            losses = []
            for _ in range(steps):
                result = train_step(state, (batch,), {})
                state = result.new_state
                losses.append(float(result.loss))
            measured = device_peak_bytes(jax.local_devices())
            plan = train_step.lower(state, (batch,), {}).compile().memory_analysis()
    return parameters, losses, measured, plan
