"""Fit preview: does every run's train step fit in one GPU's memory, planned on CPU by XLA before anything runs.

Per run, the pretraining loop's own Levanter ``Trainer`` (optimizer, mixed-precision policy, FSDP mesh and axis
mapping) is laid out on ``gpus`` virtual CPU devices (``--xla_force_host_platform_device_count``), the model is built
abstractly at its exact shape (GPT-2's 50257 or Llama-2's 32000 vocabulary, real seq_len, D and S; nothing
allocated or downloaded) and the train step is compiled; XLA's memory plan per device is

    total = arguments + outputs + temporaries − donated (aliased) bytes      (``pipeline.step_plan``)

of which the parameters and the optimizer state are the per-device shards of the state (FSDP: Levanter's
parameter axis mapping shards every array with an ``embed`` axis over the devices; the few without one, biases and
the time-embedding MLPs' hidden layers, are replicated and listed as ``replicated_param_bytes``). A run fits
when total ≤ the device's memory. One that does not fit at its batch is planned again with gradient accumulation:
Levanter's ``per_device_parallelism`` (examples per device per forward/backward) halved until the step fits; the
batch the paper reports is unchanged (the micro-batches' gradients are summed). The temporaries are XLA's CPU
plan: the GPU compiler fuses and schedules differently, so the table is a preview, and the memory probes
(Fig. 16) measure the real peak on GPUs.

Each plan runs in its own Python process, because JAX fixes the virtual device count when it starts.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from pipeline.config import RunSpec

DEVICE_MEMORY_BYTES = {"a100": 80 * 10**9, "h100": 80 * 10**9, "h200": 141 * 10**9}
"""Memory of one GPU (NVIDIA datasheets, SXM): A100 80 GB, H100 80 GB, H200 141 GB."""
FIT_COLUMNS = ("run_id", "family", "size", "time_embed_dim", "seq_len", "batch_size", "gpus", "per_device_batch",
               "micro_batch", "accumulation", "parameters", "param_bytes", "replicated_param_bytes", "optimizer_bytes",
               "temp_bytes", "total_bytes", "device_bytes", "fits", "fits_at_paper_batch")
"""Per run: the chosen micro-batch (examples per device per forward/backward) and its plan, bytes per device."""

logger = logging.getLogger(__name__)


def per_device_bytes(tree) -> int:
    """Bytes one device holds of the abstract, sharded arrays of ``tree`` (each leaf's shard shape)."""
    import jax
    import numpy as np

    total = 0
    for leaf in jax.tree_util.tree_leaves(tree):
        if isinstance(leaf, jax.ShapeDtypeStruct):
            shape = leaf.shape if leaf.sharding is None else leaf.sharding.shard_shape(leaf.shape)
            total += int(np.prod(shape)) * leaf.dtype.itemsize
    return total


def replicated_parameters(model) -> dict[str, int]:
    """Bytes per device of each parameter of an abstract, laid-out ``model`` that no mesh axis shards (every
    device holds all of it), by its path in the model tree."""
    import jax

    replicated = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(model)[0]:
        if isinstance(leaf, jax.ShapeDtypeStruct) and leaf.sharding.is_fully_replicated:
            name = jax.tree_util.keystr(path).removesuffix("[<flat index 0>]")
            replicated[name] = math.prod(leaf.shape) * leaf.dtype.itemsize
    return replicated


def plan_train_step(spec: RunSpec, vocab_size: int, micro_batch: int) -> dict[str, Any]:
    """XLA's per-device plan of ``spec``'s train step with ``micro_batch`` examples per device per
    forward/backward, on this process's devices (all of them form the FSDP mesh)."""
    import dataclasses

    import jax
    import jax.random as jrandom
    import levanter
    from haliax import Axis
    from haliax.partitioning import round_axis_for_partitioning
    from levanter.models.lm_model import compute_next_token_loss

    from pipeline.models.checkpoint import run_model_config
    from pipeline.step_plan import abstract_train_step_plan, compiled_peak_bytes
    from pipeline.train.loop import optimizer_config, trainer_config
    from pipeline.train.trainer import UndonatedTrainer

    train = dataclasses.replace(spec.train, micro_batch_size=micro_batch)
    model_config = run_model_config(spec)
    with tempfile.TemporaryDirectory(prefix=f"{spec.run_id}-fit-") as scratch:
        config = trainer_config(spec.run_id, train, Path(scratch))
        levanter.initialize(config)
        with UndonatedTrainer(config, optimizer_config(train).build(train.steps), compute_next_token_loss) as trainer:
            model_key, training_key = jrandom.split(jrandom.PRNGKey(train.seed))
            Vocab = round_axis_for_partitioning(Axis("vocab", vocab_size), trainer.parameter_axis_mapping)
            state, plan = abstract_train_step_plan(
                trainer, lambda: model_config.build(Vocab, key=model_key), vocab_size, spec.model.seq_len,
                vocab_size - 1, training_key)
    return {
        "parameters": sum(math.prod(leaf.shape) for leaf in jax.tree_util.tree_leaves(state.model)),
        "param_bytes": per_device_bytes(state.model),
        "replicated_param_bytes": sum(replicated_parameters(state.model).values()),
        "optimizer_bytes": per_device_bytes(state.opt_state),
        "temp_bytes": int(plan.temp_size_in_bytes),
        "total_bytes": compiled_peak_bytes(plan),
        "gpus": len(jax.devices()),
    }


def _plan_in_subprocess(spec: RunSpec, vocab_size: int, gpus: int, micro_batch: int) -> dict[str, Any]:
    """``plan_train_step`` in a fresh Python process whose JAX sees ``gpus`` virtual CPU devices."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={gpus}".strip()}
    with tempfile.NamedTemporaryFile("r", suffix=".json") as out:
        command = [sys.executable, "-m", "pipeline.bench.fit", spec.to_json(), str(vocab_size), str(micro_batch),
                   out.name]
        finished = subprocess.run(command, env=env, capture_output=True, text=True)
        if finished.returncode != 0:
            raise RuntimeError(f"{spec.run_id}: planning the train step at micro-batch {micro_batch} on {gpus} "
                               f"virtual devices failed: {finished.stderr.strip().splitlines()[-1]}")
        return json.loads(Path(out.name).read_text())


def fit_run(spec: RunSpec, vocab_size: int, gpus: int, device_bytes: int) -> dict[str, Any]:
    """The run's row: planned at its whole batch per device, then, if that does not fit, at the largest micro-batch
    (a divisor of the per-device batch) that the plan's temporaries, scaled linearly with the micro-batch,
    predict to fit, halved further until XLA's plan fits (or one example per device does not)."""
    if spec.train.batch_size % gpus:
        raise ValueError(f"{spec.run_id}: batch_size {spec.train.batch_size} is not divisible by {gpus} GPUs; "
                         f"choose a GPU count that divides it.")
    per_device = spec.train.batch_size // gpus
    micro_batch = per_device
    plan = _plan_in_subprocess(spec, vocab_size, gpus, micro_batch)
    fits_at_batch = plan["total_bytes"] <= device_bytes
    while plan["total_bytes"] > device_bytes and micro_batch > 1:
        fixed = plan["total_bytes"] - plan["temp_bytes"]
        predicted = max(1, int(micro_batch * (device_bytes - fixed) / plan["temp_bytes"]))
        micro_batch = max(d for d in range(1, micro_batch) if per_device % d == 0 and d <= predicted)
        plan = _plan_in_subprocess(spec, vocab_size, gpus, micro_batch)
        logger.info("%s: micro-batch %d plans %.1f GB per device", spec.run_id, micro_batch, plan["total_bytes"] / 1e9)
    return {
        "run_id": spec.run_id,
        "family": spec.model.family,
        "size": spec.size,
        "time_embed_dim": spec.model.time_embed_dim,
        "seq_len": spec.model.seq_len,
        "batch_size": spec.train.batch_size,
        "gpus": gpus,
        "per_device_batch": per_device,
        "micro_batch": micro_batch,
        "accumulation": per_device // micro_batch,
        "parameters": plan["parameters"],
        "param_bytes": plan["param_bytes"],
        "replicated_param_bytes": plan["replicated_param_bytes"],
        "optimizer_bytes": plan["optimizer_bytes"],
        "temp_bytes": plan["temp_bytes"],
        "total_bytes": plan["total_bytes"],
        "device_bytes": device_bytes,
        "fits": plan["total_bytes"] <= device_bytes,
        "fits_at_paper_batch": fits_at_batch,
    }


def fit_table(rows: list[dict[str, Any]], device: str) -> tuple[str, str]:
    """``(markdown, csv)`` of the fit rows; sizes in GB (10⁹ bytes) per device."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=FIT_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    gb = 1e9
    lines = [f"Per-device memory of one train step on {device} ({DEVICE_MEMORY_BYTES[device] / gb:.0f} GB), "
             "planned on CPU by XLA (virtual devices, the run's Levanter mesh, mixed precision and batch); "
             "micro-batch = examples per device per forward/backward (Levanter per_device_parallelism).", "",
             "| run | params | GPUs | batch/device | micro-batch | params GB | optimizer GB | temporaries GB "
             "| total GB | fits |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        verdict = "yes" if row["fits_at_paper_batch"] else ("with accumulation" if row["fits"] else "no")
        lines.append(f"| {row['run_id']} | {row['parameters'] / 1e6:.0f} M | {row['gpus']} | {row['per_device_batch']} "
                     f"| {row['micro_batch']} | {row['param_bytes'] / gb:.2f} | {row['optimizer_bytes'] / gb:.2f} "
                     f"| {row['temp_bytes'] / gb:.1f} | {row['total_bytes'] / gb:.1f} | {verdict} |")
    return "\n".join(lines) + "\n", buffer.getvalue()


def write_fit(config: dict[str, Any], device: str, gpus: int, run_ids: list[str] | None, out_md: Path,
              out_csv: Path) -> list[dict[str, Any]]:
    """Plan every pretraining run and memory probe of ``config`` (or ``run_ids``) and write the fit table."""
    from pipeline.artifacts import atomic_write_text
    from pipeline.bench.cost import vocab_size
    from pipeline.config import memory_probes, pretrain_runs

    if device not in DEVICE_MEMORY_BYTES:
        raise ValueError(f"--device {device!r}: unknown GPU; expected one of {sorted(DEVICE_MEMORY_BYTES)}.")
    runs = {**pretrain_runs(config), **memory_probes(config)}
    unknown = sorted(set(run_ids or []) - set(runs))
    if unknown:
        raise ValueError(f"--runs {', '.join(unknown)}: not a pretraining run or memory probe of preset "
                         f"{config['preset']!r}; expected some of {', '.join(runs)}.")
    rows = []
    for run_id in run_ids or list(runs):
        spec = runs[run_id]
        rows.append(fit_run(spec, vocab_size(config, spec.tokenizer), gpus, DEVICE_MEMORY_BYTES[device]))
        logger.info("%s: %s", run_id, json.dumps(rows[-1]))
    markdown, table = fit_table(rows, device)
    atomic_write_text(out_csv, table)
    atomic_write_text(out_md, markdown)
    return rows


def _plan_main(argv: list[str]) -> None:
    """``python -m pipeline.bench.fit <spec-json> <vocab> <micro-batch> <out-json>``: one plan (see ``fit_run``)."""
    spec_json, vocab, micro_batch, out = argv
    plan = plan_train_step(RunSpec.from_json(spec_json), int(vocab), int(micro_batch))
    Path(out).write_text(json.dumps(plan))


if __name__ == "__main__":
    _plan_main(sys.argv[1:])
