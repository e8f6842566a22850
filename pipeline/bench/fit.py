"""Fit preview: does every run fit in one GPU's memory, planned on CPU by XLA before anything runs.

One row per workload, its ``role``:

- ``pretrain`` / ``probe``: a pretraining run's (memory probe's) train step. The training loop's own Levanter
  ``UndonatedTrainer`` (optimizer, mixed-precision policy, FSDP mesh and axis mapping) is laid out on ``gpus``
  virtual CPU devices (``--xla_force_host_platform_device_count``), the model is built abstractly at its exact
  shape (GPT-2's 50257 or Llama-2's 32000 vocabulary, real seq_len, D and S; nothing allocated or downloaded) and
  the train step is compiled.
- ``finetune``: the same train step for a fine-tune (its batch and optimizer), whose model is the source run's,
  built abstractly and passed through the fine-tune's own ``resample`` (discretised to N' Euler steps, LoRA
  adapters) and ``trainable_filter``: with LoRA the optimizer holds state for the adapters and embeddings only and
  Levanter keeps the frozen weights in the compute precision. No source checkpoint is read.
- ``downstream``: lm-eval's scoring forward pass (``pipeline.evaluate.harness.LevanterLM``, inference mode) on the
  trained run's model in its compute precision, on the downstream job's one GPU (the model unsharded), compiled
  for ``BATCH_SIZE`` requests at the full seq_len (the harness's longest bucket); no optimizer state.

XLA's memory plan per device is

    total = arguments + outputs + temporaries − donated (aliased) bytes      (``pipeline.step_plan``)

of which the parameters and the optimizer state are the per-device shards of the state (FSDP: Levanter's
parameter axis mapping shards every array with an ``embed`` axis over the devices; the few without one, biases and
the time-embedding MLPs' hidden layers, are replicated and listed as ``replicated_param_bytes``; downstream, the
whole model is on its one device). A workload fits when total ≤ the share of the device's memory that a job's JAX
reserves (``pipeline.site.gpu_memory_fraction()``, 0.9: ``usable_bytes``). A train step that does not
fit at its batch is planned again with gradient accumulation: Levanter's ``per_device_parallelism`` (examples per
device per forward/backward) halved until the step fits; the batch the paper reports is unchanged (the
micro-batches' gradients are summed). The temporaries are XLA's CPU plan: the GPU compiler fuses and schedules
differently, so the table is a preview, and the memory probes (Fig. 16) measure the real peak on GPUs.

Each training workload is planned on ``gpus`` GPUs of a named device, or, given a SLURM site (``--site``), on the
GPUs ``pipeline.site`` gives its job (a memory probe: one node's) of the site's GPU memory; the SLURM jobs then
train at the micro-batch of their row (``pipeline.site.JobResources.micro_batch``).

A row is one job's: it is found by ``(run_id, gpus, device_bytes)`` and holds for the run as the preset defines it
only while its ``plan_key`` (a hash of what the plan depends on: ``plan_key``) and its ``usable_bytes`` are the
current ones; otherwise ``pipeline.site`` refuses it as stale. ``--runs`` merges its rows into an existing table.

The plans run in a child Python process, because JAX fixes the virtual device count when it starts: the first plan
of every workload of one device count in one process (one Levanter import), each further plan of the micro-batch
search in its own.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
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

from pipeline.config import FinetuneSpec, RunSpec, TrainSpec
from pipeline.site import Site, gpu_memory_fraction

DEVICE_MEMORY_BYTES = {"a100": 80 * 10**9, "h100": 80 * 10**9, "h200": 141 * 10**9}
"""Memory of one GPU (NVIDIA datasheets, SXM): A100 80 GB, H100 80 GB, H200 141 GB."""
ROLES = ("pretrain", "probe", "finetune", "downstream")
FIT_COLUMNS = ("run_id", "plan_key", "role", "family", "size", "time_embed_dim", "seq_len", "batch_size", "gpus",
               "per_device_batch", "micro_batch", "accumulation", "parameters", "trainable_parameters", "param_bytes",
               "replicated_param_bytes", "optimizer_bytes", "temp_bytes", "total_bytes", "device_bytes", "usable_bytes",
               "fits", "fits_at_paper_batch")
"""Per workload: the chosen micro-batch (examples per device per forward/backward) and its plan, bytes per device."""
TEXT_COLUMNS = {"run_id", "plan_key", "role", "family", "size"}
VERDICT_COLUMNS = {"fits", "fits_at_paper_batch"}

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Workload:
    """One row of the fit table: ``role`` (one of ``ROLES``) of the run ``run``; a fine-tune is ``finetune``, whose
    source is ``run``."""

    role: str
    run: RunSpec
    finetune: FinetuneSpec | None = None

    def __post_init__(self):
        if self.role not in ROLES or (self.role == "finetune") != (self.finetune is not None):
            raise ValueError(f"{self.run.run_id}: a fit workload's role must be one of {ROLES} (a fine-tune's with "
                             f"its FinetuneSpec), got {self.role!r}.")

    @property
    def run_id(self) -> str:
        """The run's id; a fine-tune's own id; ``downstream-<run>`` for lm-eval on a run."""
        if self.role == "downstream":
            return f"downstream-{self.run.run_id}"
        return self.run.run_id if self.finetune is None else self.finetune.run_id

    @property
    def train(self) -> TrainSpec:
        """The train spec of the step planned: the fine-tune's own, else the run's."""
        return self.run.train if self.finetune is None else self.finetune.train

    @property
    def batch_size(self) -> int:
        """Examples per train step; downstream, lm-eval requests per forward pass."""
        from pipeline.evaluate.commands import BATCH_SIZE

        return BATCH_SIZE if self.role == "downstream" else self.train.batch_size

    def devices(self, gpus: int) -> int:
        """Devices the workload runs on: a training job's ``gpus``; downstream, its job's one GPU."""
        return 1 if self.role == "downstream" else gpus

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "run": dataclasses.asdict(self.run),
                "finetune": None if self.finetune is None else dataclasses.asdict(self.finetune)}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Workload:
        finetune = None if raw["finetune"] is None else FinetuneSpec.from_json(json.dumps(raw["finetune"]))
        return cls(raw["role"], RunSpec.from_dict(raw["run"]), finetune)


PLAN_TRAIN_FIELDS = ("batch_size", "mixed_precision", "dropout")
PLAN_FINETUNE_FIELDS = ("source_steps", "num_steps", "method", "lora_rank", "train_embeddings")


def plan_key(workload: Workload, vocab_size: int) -> str:
    """A hash of what a workload's plan depends on: its role, its model (every field of the run's ``ModelSpec``:
    family, widths, depth, seq_len, D, ...), the vocabulary, the train step's ``PLAN_TRAIN_FIELDS``, a fine-tune's
    ``PLAN_FINETUNE_FIELDS`` (N', LoRA rank, what trains), and the train step's version (``TRAIN_STEP``: a changed
    step, e.g. with or without buffer donation, plans differently). Learning rates, step counts, seeds and
    evaluation settings leave the plan unchanged and keep the row valid; the micro-batch is the row's answer."""
    from pipeline.train.identity import TRAIN_STEP

    plan = {"role": workload.role, "model": dataclasses.asdict(workload.run.model), "vocab_size": vocab_size,
            "train_step": TRAIN_STEP,
            "train": {field: getattr(workload.train, field) for field in PLAN_TRAIN_FIELDS},
            "finetune": None if workload.finetune is None
            else {field: getattr(workload.finetune, field) for field in PLAN_FINETUNE_FIELDS}}
    return hashlib.sha256(json.dumps(plan, sort_keys=True).encode()).hexdigest()[:16]


def workload_vocab_size(config: dict[str, Any], workload: Workload) -> int:
    """The vocabulary of the workload's tokenizer (a fine-tune's: its source run's)."""
    from pipeline.bench.cost import vocab_size

    return vocab_size(config, workload.run.tokenizer)


def workloads(config: dict[str, Any]) -> dict[str, Workload]:
    """Every workload of a preset by id: its pretraining runs, memory probes, fine-tunes and downstream runs."""
    from pipeline.config import finetune_runs, memory_probes, pretrain_runs

    runs = pretrain_runs(config)
    rows = [Workload("pretrain", spec) for spec in runs.values()]
    rows += [Workload("probe", spec) for spec in memory_probes(config).values()]
    rows += [Workload("finetune", runs[spec.source_run], spec) for spec in finetune_runs(config).values()]
    rows += [Workload("downstream", runs[run_id]) for pair in config["downstream"]["pairs"].values()
             for run_id in pair]
    return {workload.run_id: workload for workload in rows}


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


def plan_train_step(workload: Workload, vocab_size: int, micro_batch: int) -> dict[str, Any]:
    """XLA's per-device plan of ``workload``'s train step (a pretraining run, memory probe or fine-tune) with
    ``micro_batch`` examples per device per forward/backward, on this process's devices (all of them form the FSDP
    mesh)."""
    import equinox as eqx
    import jax
    import jax.random as jrandom
    import levanter
    from haliax import Axis
    from haliax.partitioning import round_axis_for_partitioning
    from levanter.models.lm_model import compute_next_token_loss

    from pipeline.models.checkpoint import run_model_config
    from pipeline.models.param_count import count_leaves
    from pipeline.step_plan import abstract_train_step_plan, compiled_peak_bytes
    from pipeline.train.finetune import resample, trainable_filter
    from pipeline.train.setup import optimizer_config, trainer_config
    from pipeline.train.trainer import UndonatedTrainer

    finetune = workload.finetune
    train = dataclasses.replace(workload.train, micro_batch_size=micro_batch)
    model_config = run_model_config(workload.run)
    with tempfile.TemporaryDirectory(prefix=f"{workload.run_id}-fit-") as scratch:
        config = trainer_config(workload.run_id, train, Path(scratch))
        levanter.initialize(config)
        with UndonatedTrainer(config, optimizer_config(train).build(train.steps), compute_next_token_loss) as trainer:
            model_key, training_key = jrandom.split(jrandom.PRNGKey(train.seed))
            Vocab = round_axis_for_partitioning(Axis("vocab", vocab_size), trainer.parameter_axis_mapping)

            def model_init():
                model = model_config.build(Vocab, key=model_key)
                return model if finetune is None else resample(finetune, model, model_key)

            trainable = None if finetune is None else trainable_filter(finetune)
            is_trainable = True if trainable is None else trainable(eqx.filter_eval_shape(model_init))
            state, plan = abstract_train_step_plan(trainer, model_init, vocab_size, workload.run.model.seq_len,
                                                   vocab_size - 1, training_key, is_trainable=is_trainable)
    return {
        "parameters": count_leaves(state.model),
        "trainable_parameters": count_leaves(state.trainable_model),
        "param_bytes": per_device_bytes(state.model),
        "replicated_param_bytes": sum(replicated_parameters(state.model).values()),
        "optimizer_bytes": per_device_bytes(state.opt_state),
        "temp_bytes": int(plan.temp_size_in_bytes),
        "total_bytes": compiled_peak_bytes(plan),
        "gpus": len(jax.devices()),
    }


def plan_downstream(workload: Workload, vocab_size: int, batch_size: int) -> dict[str, Any]:
    """XLA's plan of lm-eval's scoring forward pass on ``workload``'s run: the harness's ``LevanterLM`` over the
    model in the run's compute precision (as ``evaluate_downstream`` casts it), its jitted scoring function for
    ``batch_size`` requests at the full seq_len, on one device (the harness loads the model unsharded)."""
    import equinox as eqx
    import haliax as hax
    import jax
    import jax.numpy as jnp
    import jmp
    from haliax import Axis

    from pipeline.evaluate.harness import LevanterLM
    from pipeline.models.checkpoint import run_model_config
    from pipeline.models.param_count import count_leaves
    from pipeline.step_plan import compiled_peak_bytes

    def is_abstract(leaf) -> bool:
        return isinstance(leaf, jax.ShapeDtypeStruct)

    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    spec = workload.run
    model = eqx.filter_eval_shape(run_model_config(spec).build, Axis("vocab", vocab_size), key=jax.random.PRNGKey(0))
    model = eqx.filter_eval_shape(jmp.get_policy(spec.train.mixed_precision).cast_to_compute, model)
    lm = LevanterLM(model, None, batch_size=batch_size)
    arrays, static = eqx.partition(lm.model, is_abstract, is_leaf=is_abstract)
    arrays = jax.tree_util.tree_map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=device),
                                    arrays)
    rows = (batch_size, spec.model.seq_len)
    tokens = hax.NamedArray(jax.ShapeDtypeStruct(rows, jnp.int32, sharding=device),
                            (Axis("batch", batch_size), lm.model.Pos))
    targets = jax.ShapeDtypeStruct(rows, jnp.int32, sharding=device)
    scored = jax.ShapeDtypeStruct(rows, jnp.bool_, sharding=device)

    def score(arrays, tokens, targets, scored):
        return lm._scores(eqx.combine(arrays, static, is_leaf=is_abstract), tokens, targets, scored)

    # The harness's filter_jit takes concrete arrays only; an outer jit carries the abstract ones into it.
    plan = jax.jit(score).lower(arrays, tokens, targets, scored).compile().memory_analysis()
    param_bytes = per_device_bytes(arrays)
    return {
        "parameters": count_leaves(arrays),
        "trainable_parameters": 0,
        "param_bytes": param_bytes,
        "replicated_param_bytes": param_bytes,
        "optimizer_bytes": 0,
        "temp_bytes": int(plan.temp_size_in_bytes),
        "total_bytes": compiled_peak_bytes(plan),
        "gpus": 1,
    }


def plan_workload(workload: Workload, vocab_size: int, micro_batch: int) -> dict[str, Any]:
    """The plan of one workload at ``micro_batch`` examples per device (downstream: requests per forward pass)."""
    if workload.role == "downstream":
        return plan_downstream(workload, vocab_size, micro_batch)
    return plan_train_step(workload, vocab_size, micro_batch)


def _plans_in_subprocess(requests: list[tuple[Workload, int, int]], gpus: int) -> list[dict[str, Any]]:
    """``plan_workload(workload, vocab_size, micro_batch)`` of each request, in order, in one fresh Python process
    whose JAX sees ``gpus`` virtual CPU devices."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={gpus}".strip()}
    payload = [[workload.to_dict(), vocab_size, micro_batch] for workload, vocab_size, micro_batch in requests]
    with tempfile.TemporaryDirectory(prefix="fit-") as scratch:
        todo, out = Path(scratch) / "requests.json", Path(scratch) / "plans.json"
        todo.write_text(json.dumps(payload))
        finished = subprocess.run([sys.executable, "-m", "pipeline.bench.fit", str(todo), str(out)], env=env,
                                  capture_output=True, text=True)
        if finished.returncode != 0:
            lines = finished.stderr.strip().splitlines() or ["no error message"]
            raise RuntimeError(f"planning on {gpus} virtual devices failed: {lines[-1]}")
        return json.loads(out.read_text())


def fit_run(workload: Workload, vocab_size: int, gpus: int, device_bytes: int,
            plan: dict[str, Any]) -> dict[str, Any]:
    """The workload's row from its ``plan`` at the whole batch per device; a train step that does not fit is
    planned again at the largest micro-batch (a divisor of the per-device batch) that the plan's temporaries,
    scaled linearly with the micro-batch, predict to fit, halved further until XLA's plan fits (or one example per
    device does not). Downstream rows are planned at lm-eval's batch only."""
    devices = workload.devices(gpus)
    per_device = workload.batch_size // devices
    micro_batch = per_device
    usable = int(device_bytes * gpu_memory_fraction())
    fits_at_batch = plan["total_bytes"] <= usable
    while workload.role != "downstream" and plan["total_bytes"] > usable and micro_batch > 1:
        fixed = plan["total_bytes"] - plan["temp_bytes"]
        predicted = max(1, int(micro_batch * (usable - fixed) / plan["temp_bytes"]))
        micro_batch = max(d for d in range(1, micro_batch) if per_device % d == 0 and d <= predicted)
        plan = _plans_in_subprocess([(workload, vocab_size, micro_batch)], devices)[0]
        logger.info("%s: micro-batch %d plans %.1f GB per device", workload.run_id, micro_batch,
                    plan["total_bytes"] / 1e9)
    return {
        "run_id": workload.run_id,
        "plan_key": plan_key(workload, vocab_size),
        "role": workload.role,
        "family": workload.run.model.family,
        "size": workload.run.size,
        "time_embed_dim": workload.run.model.time_embed_dim,
        "seq_len": workload.run.model.seq_len,
        "batch_size": workload.batch_size,
        "gpus": devices,
        "per_device_batch": per_device,
        "micro_batch": micro_batch,
        "accumulation": per_device // micro_batch,
        **{key: plan[key] for key in ("parameters", "trainable_parameters", "param_bytes", "replicated_param_bytes",
                                      "optimizer_bytes", "temp_bytes", "total_bytes")},
        "device_bytes": device_bytes,
        "usable_bytes": usable,
        "fits": plan["total_bytes"] <= usable,
        "fits_at_paper_batch": fits_at_batch,
    }


def fit_rows(chosen: list[Workload], vocab_sizes: list[int], gpus: list[int],
             device_bytes: int) -> list[dict[str, Any]]:
    """The rows of ``chosen`` (vocabulary sizes ``vocab_sizes``, training jobs of ``gpus`` GPUs): every first plan,
    at the whole batch per device, in one process per device count, then each row's micro-batch search."""
    for workload, count in zip(chosen, gpus, strict=True):
        devices = workload.devices(count)
        if workload.batch_size % devices:
            raise ValueError(f"{workload.run_id}: batch_size {workload.batch_size} is not divisible by {devices} "
                             f"GPUs; choose a GPU count that divides it.")
    requests = [(workload, vocab_size, workload.batch_size // workload.devices(count))
                for workload, vocab_size, count in zip(chosen, vocab_sizes, gpus, strict=True)]
    plans: dict[int, dict[str, Any]] = {}
    for devices in sorted({workload.devices(count) for workload, count in zip(chosen, gpus, strict=True)}):
        same = [i for i, (workload, count) in enumerate(zip(chosen, gpus, strict=True))
                if workload.devices(count) == devices]
        plans.update(zip(same, _plans_in_subprocess([requests[i] for i in same], devices), strict=True))
    rows = []
    for i, (workload, vocab_size, _) in enumerate(requests):
        rows.append(fit_run(workload, vocab_size, gpus[i], device_bytes, plans[i]))
        logger.info("%s: %s", workload.run_id, json.dumps(rows[-1]))
    return rows


def site_gpus(config: dict[str, Any], site: Site, chosen: list[Workload]) -> list[int]:
    """The GPUs each workload's job gets at ``site`` (``pipeline.site``): a pretraining run's and a fine-tune's from
    its size, a memory probe's one node's; a downstream job's one."""
    from pipeline.site import JobResources

    if site.gpus_per_node == 0:
        raise ValueError("--site: the site has no GPUs (gpus_per_node 0); there is no GPU memory to plan for.")
    jobs = JobResources(config, site)

    def gpus(workload: Workload) -> int:
        if workload.role == "downstream":
            return 1
        if workload.role == "probe":
            return jobs.memory_probe_gpu_count(workload.run_id)
        return jobs.training_gpu_count(workload.role, workload.run_id)

    return [gpus(workload) for workload in chosen]


def planned_jobs(config: dict[str, Any], device: str | None, gpus: int | None, site: Site | None,
                 run_ids: list[str] | None = None) -> list[tuple[Workload, int, int]]:
    """``(workload, GPUs, device bytes)`` of every workload of ``config`` (or of ``run_ids``): on ``gpus`` GPUs of
    ``device``, or, given a ``site``, on the GPUs the site gives each job, of the site's memory."""
    if site is None and device not in DEVICE_MEMORY_BYTES:
        raise ValueError(f"--device {device!r}: unknown GPU; expected one of {sorted(DEVICE_MEMORY_BYTES)}.")
    known = workloads(config)
    unknown = sorted(set(run_ids or []) - set(known))
    if unknown:
        raise ValueError(f"--runs {', '.join(unknown)}: not a pretraining run, memory probe, fine-tune or "
                         f"downstream-<run> of preset {config['preset']!r}; expected some of {', '.join(known)}.")
    chosen = [known[run_id] for run_id in run_ids or known]
    if site is None:
        return [(workload, gpus, DEVICE_MEMORY_BYTES[device]) for workload in chosen]
    return [(workload, count, site.gpu_memory_bytes) for workload, count in zip(chosen, site_gpus(config, site, chosen),
                                                                              strict=True)]


def plans_digest(config: dict[str, Any], device: str | None, gpus: int | None, site: Site | None) -> str:
    """A hash of every row the fit table of ``config`` would hold (run, ``plan_key``, GPUs, memory and the share
    JAX may use): the ``fit`` rule's parameter, so that Snakemake plans again when the preset or the site changes
    what a row means, and not when only learning rates or step counts change."""
    rows = sorted((workload.run_id, plan_key(workload, workload_vocab_size(config, workload)), count, device_bytes,
                   int(device_bytes * gpu_memory_fraction()))
                  for workload, count, device_bytes in planned_jobs(config, device, gpus, site))
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16]


def job_key(row: dict[str, Any]) -> tuple[str, int, int]:
    """The job a row is for: ``(run_id, gpus, device_bytes)``."""
    return row["run_id"], int(row["gpus"]), int(row["device_bytes"])


def read_fit_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a fit table CSV with numbers and verdicts parsed; rows of a table from before a column existed
    are dropped (they can no longer be matched to a job), with a warning."""
    with Path(path).open(newline="") as stream:
        raw = list(csv.DictReader(stream))
    rows = [row for row in raw if all(row.get(column) not in (None, "") for column in FIT_COLUMNS
                                      if column != "time_embed_dim")]
    if len(rows) < len(raw):
        logger.warning("%s: %d row(s) lack a column of this version's table and were dropped", path,
                       len(raw) - len(rows))
    def parse(column: str, value: str) -> Any:
        if column in TEXT_COLUMNS:
            return value
        if column in VERDICT_COLUMNS:
            return value == "True"
        return int(value) if value else None

    return [{column: parse(column, row[column]) for column in FIT_COLUMNS} for row in rows]


def fit_table(rows: list[dict[str, Any]]) -> tuple[str, str]:
    """``(markdown, csv)`` of the fit rows; sizes in GB (10⁹ bytes) per device."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=FIT_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    gb = 1e9
    lines = ["Per-device memory planned on CPU by XLA (virtual devices; a train step with the run's Levanter mesh, "
             "mixed precision and batch; downstream, lm-eval's forward pass on one GPU). A step fits below the "
             f"share of the GPU's memory that a job's JAX reserves ({gpu_memory_fraction():.0%}: usable GB). "
             "micro-batch = examples per device per forward/backward (Levanter per_device_parallelism; downstream, "
             "requests per forward pass).", "",
             "| run | role | params | GPUs | GPU GB (usable) | batch/device | micro-batch | params GB | optimizer GB "
             "| temporaries GB | total GB | fits |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        verdict = "yes" if row["fits_at_paper_batch"] else ("with accumulation" if row["fits"] else "no")
        lines.append(f"| {row['run_id']} | {row['role']} | {row['parameters'] / 1e6:.0f} M | {row['gpus']} "
                     f"| {row['device_bytes'] / gb:.0f} ({row['usable_bytes'] / gb:.0f}) "
                     f"| {row['per_device_batch']} | {row['micro_batch']} | {row['param_bytes'] / gb:.2f} "
                     f"| {row['optimizer_bytes'] / gb:.2f} | {row['temp_bytes'] / gb:.1f} "
                     f"| {row['total_bytes'] / gb:.1f} | {verdict} |")
    return "\n".join(lines) + "\n", buffer.getvalue()


def write_fit(config: dict[str, Any], device: str | None, gpus: int | None, run_ids: list[str] | None, out_md: Path,
              out_csv: Path, site: Site | None = None) -> list[dict[str, Any]]:
    """Plan every workload of ``config`` (or those of ``run_ids``) and write the fit table: on ``gpus`` GPUs per
    training job of ``device``, or, given a ``site``, on the GPUs the site gives each job, of the site's memory.
    With ``run_ids``, the new rows replace the rows of the same jobs in an existing ``out_csv`` and the others are
    kept; without, the table holds the new rows only. Returns the new rows."""
    from pipeline.artifacts import atomic_write_text

    jobs = planned_jobs(config, device, gpus, site, run_ids)
    device_bytes = jobs[0][2]
    chosen = [workload for workload, _, _ in jobs]
    rows = fit_rows(chosen, [workload_vocab_size(config, workload) for workload in chosen],
                    [count for _, count, _ in jobs], device_bytes)
    kept = []
    if run_ids and Path(out_csv).is_file():
        replaced = {job_key(row) for row in rows}
        kept = [row for row in read_fit_rows(out_csv) if job_key(row) not in replaced]
    markdown, table = fit_table(kept + rows)
    atomic_write_text(out_csv, table)
    atomic_write_text(out_md, markdown)
    return rows


def _plan_main(argv: list[str]) -> None:
    """``python -m pipeline.bench.fit <requests-json> <out-json>``: the plans of ``[workload, vocab, micro-batch]``
    requests (see ``fit_rows``), one after another; each one's compiled programs are dropped before the next."""
    import jax

    requests, out = argv
    plans = []
    for raw, vocab_size, micro_batch in json.loads(Path(requests).read_text()):
        workload = Workload.from_dict(raw)
        try:
            plans.append(plan_workload(workload, vocab_size, micro_batch))
        except Exception as error:
            raise RuntimeError(f"{workload.run_id} at micro-batch {micro_batch}: {type(error).__name__}: "
                               f"{error}".replace("\n", " ")) from error
        jax.clear_caches()
    Path(out).write_text(json.dumps(plans))


if __name__ == "__main__":
    _plan_main(sys.argv[1:])
