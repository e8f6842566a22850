"""One preflight job (docs/cluster.md#preflight): a shape's first run, bounded to ``warmup + timed`` updates
(``RunSpec.bounded``), trained by the real loop (``pipeline.train.loop.train_run``), restarted from its checkpoint,
and measured. Its fingerprint is marked ``preflight`` (never a real run's); no run summary is written.

- MFU = 3 × forward FLOPs per token × tokens/s / peak FLOP/s of all devices, in the compute dtype (``peak_flops``);
- compile: from the ``compile`` phase to the first update; restore: the restart's set-up to its evaluation (Levanter
  restores the state there)."""

import logging
import os
import resource
import shutil
import statistics
import sys
import time
import timeit
from importlib import metadata
from logging.handlers import BufferingHandler
from pathlib import Path
from typing import Any

from pipeline.artifacts import folder_bytes, read_metrics
from pipeline.config import RunSpec
from pipeline.execution.phases import MARKER

MATMUL_SIZE = 2048
MATMUL_REPEATS = 5


def phase_seconds(markers: list[logging.LogRecord], start: str, end: str, after: int = 0) -> float:
    """Seconds from the first ``start`` of the train loop's phase markers (``pipeline.execution.phases``), from index
    ``after`` on, to the next ``end`` marker."""
    phases = [MARKER.search(marker.getMessage()) for marker in markers]
    names = [phase["name"] for phase in phases]
    first = names.index(start, after)
    return float(phases[names.index(end, first)]["time"]) - float(phases[first]["time"])


def peak_flops(compute_dtype) -> tuple[float, str]:
    """(peak FLOP/s of all devices, where it comes from): Levanter's device table, else on a CPU one ``MATMUL_SIZE``²
    f32 matmul per device measured here, best of ``MATMUL_REPEATS``, else ``nan`` and "unknown peak"."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec
    from levanter.utils.flop_utils import device_hardware_flops

    devices = jax.devices()
    per_device = device_hardware_flops(devices[0], compute_dtype)
    if per_device:
        return per_device * len(devices), f"Levanter's peak of {devices[0].device_kind}"
    if devices[0].platform != "cpu":
        return float("nan"), "unknown peak"
    mesh = jax.sharding.Mesh(devices, ("device",))
    sharding = NamedSharding(mesh, PartitionSpec("device"))
    a = jax.device_put(jnp.ones((len(devices), MATMUL_SIZE, MATMUL_SIZE), jnp.float32), sharding)
    matmul = jax.jit(lambda x: jnp.einsum("bij,bjk->bik", x, x))
    matmul(a).block_until_ready()
    best = min(timeit.repeat(lambda: matmul(a).block_until_ready(), number=1, repeat=MATMUL_REPEATS))
    measured = f"CPU peak measured in this job (f32 matmul {MATMUL_SIZE}^2 per device)"
    return 2 * MATMUL_SIZE**3 * len(devices) / best, measured


def device_columns() -> dict[str, Any]:
    """This process's software versions ("none" where absent), backend, device kind and device count."""
    import jax
    import jaxlib

    driver_file = Path("/proc/driver/nvidia/version")
    plugins = ("jax-cuda12-plugin", "jax-cuda13-plugin")  # the first installed
    devices = jax.devices()
    return {
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "cuda_plugin": next((p.version for name in plugins for p in metadata.distributions(name=name)), "none"),
        "driver": driver_file.read_text().splitlines()[0].strip() if driver_file.is_file() else "none",
        "platform_version": devices[0].client.platform_version,
        "backend": jax.default_backend(),
        "device_kind": devices[0].device_kind,
        "devices": len(devices),
    }


def peak_memory() -> dict[str, Any]:
    """The peak memory columns: the most bytes any device held, or the process's peak resident memory."""
    import jax

    stats = [device.memory_stats() for device in jax.devices()]
    if all(stats):
        peak = max(int(s.get("peak_bytes_in_use", 0)) for s in stats)
        return {"peak_memory_bytes": peak, "memory_source": "device peak_bytes_in_use"}
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"peak_memory_bytes": rss, "memory_source": "host peak RSS (backend has no memory stats)"}


def preflight_pretrain(
    spec_json: str,
    job_dir: str,
    cache_dir: str,
    tokenizer_dir: str,
    warmup: int,
    timed: int,
    micro_batch: int,
    planned_bytes: int | None,
    budget_bytes: int | None,
) -> dict[str, Any]:
    """The measurement columns of one shape (module docstring); ``planned_bytes`` and ``budget_bytes``: the fit row's,
    None to plan it here as the fit table does, against the device's ``bytes_limit`` (on a CPU the host's memory)."""
    import jax
    import jmp
    from transformers import AutoTokenizer

    from pipeline.models.checkpoint import run_model_config
    from pipeline.planning.grid import Pretraining
    from pipeline.planning.xla_plans import plan_train_step
    from pipeline.train.loop import TrainJob, train_run

    started = time.perf_counter()
    spec = RunSpec.from_json(spec_json).bounded(warmup + timed, micro_batch)
    train_dir = Path(job_dir) / "train"  # its config.yaml: what the later stages' loader reads
    shutil.rmtree(train_dir, ignore_errors=True)  # a rerun measures afresh: no resume from an earlier preflight
    job = TrainJob.pretraining(spec, train_dir, cache_dir, tokenizer_dir, preflight=True)
    clock = BufferingHandler(capacity=sys.maxsize)  # keeps every phase marker the loop logs
    logging.getLogger("pipeline.execution.phases").addHandler(clock)
    try:
        train_run(job)
        restart_at = len(clock.buffer)
        train_run(job)
    finally:
        logging.getLogger("pipeline.execution.phases").removeHandler(clock)
    measured = training_columns(train_dir, warmup, spec.train.batch_size * spec.model.seq_len)
    records = read_metrics(train_dir / "metrics.jsonl")
    waits = [r["throughput/loading_time"] for r in records if "throughput/loading_time" in r and r["step"] >= warmup]
    vocab_size = len(AutoTokenizer.from_pretrained(tokenizer_dir))  # the vocabulary axis before its rounding
    flops_per_token = float(run_model_config(spec).flops_per_token(vocab_size))
    peak, peak_source = peak_flops(jmp.get_policy(spec.train.mixed_precision).compute_dtype)
    memory = peak_memory()  # of the training, before a plan here
    plan_source = "fit table" if planned_bytes is not None else "XLA plan in this job"
    if planned_bytes is None:
        per_device = micro_batch or spec.train.batch_size // len(jax.devices())
        stats = jax.devices()[0].memory_stats()
        budget_bytes = int(stats["bytes_limit"]) if stats else os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        planned_bytes = int(plan_train_step(Pretraining(spec, vocab=vocab_size), per_device)["total_bytes"])
    return {
        **device_columns(),
        **measured,
        "warmup_updates": warmup,
        "timed_updates": timed,
        "compile_s": phase_seconds(clock.buffer, "compile", "train"),
        "flops_per_token": 3 * flops_per_token,
        "peak_flops": peak,
        "peak_source": peak_source,
        "mfu": 3 * flops_per_token * measured["tokens_per_s"] / peak,
        **memory,
        "planned_bytes": planned_bytes,
        "budget_bytes": budget_bytes,
        "plan_source": plan_source,
        "checkpoint_save_s": phase_seconds(clock.buffer, "checkpoint", "final-eval"),
        "restore_s": phase_seconds(clock.buffer, "setup", "final-eval", restart_at),
        "input_wait_s": statistics.median(waits) if waits else 0.0,
        "wall_s": time.perf_counter() - started,
    }


def training_columns(train_dir: Path, first_timed: int, tokens_per_update: int) -> dict[str, Any]:
    """A bounded job's micro-batch split, median step time from step ``first_timed`` on, tokens/s =
    ``tokens_per_update`` / that time (in all and per device) and checkpoint bytes."""
    import jax

    records = read_metrics(Path(train_dir) / "metrics.jsonl")
    step_s = [r["step_s"] for r in records if "step_s" in r and r["step"] >= first_timed]
    split = next(r for r in records if "micro_batch" in r)
    median_step = statistics.median(step_s)
    return {
        "micro_batch": split["micro_batch"],
        "gradient_accumulation": split["gradient_accumulation"],
        "timed_updates": len(step_s),
        "median_step_s": median_step,
        "tokens_per_s": tokens_per_update / median_step,
        "tokens_per_s_per_device": tokens_per_update / median_step / len(jax.devices()),
        "checkpoint_bytes": folder_bytes(Path(train_dir) / "checkpoints"),
    }
