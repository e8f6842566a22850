"""Fit preview: does every job fit in one GPU's memory, planned on CPU by XLA before anything runs
(docs/planning.md#does-every-run-fit, which says what each row plans).

One row per workload (``role``: its kind): a train step (``plan_train_step``) or lm-eval's scoring forward pass
(``plan_downstream``), its model built abstractly at its exact dimensions. XLA's memory plan per device is

    total = arguments + outputs + temporaries − donated (aliased) bytes      (``pipeline.train.step_plan``)

A workload fits when total ≤ the share of the device's memory that a job's JAX reserves (``usable_bytes``); a train
step that does not fit is planned again at a smaller micro-batch until it fits. The plans run in child processes
(``python -m pipeline.planning.fit``: JAX fixes the virtual device count when it starts), the first plans of every
workload of one device count in one process, each further plan of the micro-batch search in its own. Longer than 300
lines because a plan and the search that runs it are one concern: what a plan returns is the fit row's columns
(``PLAN_BYTES``), and its child process runs this module.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.artifacts import csv_text, markdown_table
from pipeline.config.site import Site
from pipeline.execution.job_env import gpu_memory_fraction
from pipeline.execution.progress import Progress
from pipeline.planning.cost import DEVICES
from pipeline.planning.grid import Grid, Workload, vocab_size
from pipeline.planning.measured import FIT_COLUMNS, FitRow, plan_key
from pipeline.train.digests import json_digest

logger = logging.getLogger(__name__)
PLAN_BYTES = FIT_COLUMNS[FIT_COLUMNS.index("parameters") : FIT_COLUMNS.index("device_bytes")]
"""What a plan gives a fit row: parameter counts and bytes per device."""
GB = 1e9
MARKDOWN_COLUMNS: tuple[tuple[str, str, Callable[[FitRow], str]], ...] = (
    ("run", "l", lambda row: row.run_id),
    ("role", "l", lambda row: row.role),
    ("params", "r", lambda row: f"{row.parameters / 1e6:.0f} M"),
    ("GPUs", "r", lambda row: str(row.gpus)),
    ("GPU GB (usable)", "r", lambda row: f"{row.device_bytes / GB:.0f} ({row.usable_bytes / GB:.0f})"),
    ("batch/device", "r", lambda row: str(row.per_device_batch)),
    ("micro-batch", "r", lambda row: str(row.micro_batch)),
    ("params GB", "r", lambda row: f"{row.param_bytes / GB:.2f}"),
    ("optimizer GB", "r", lambda row: f"{row.optimizer_bytes / GB:.2f}"),
    ("temporaries GB", "r", lambda row: f"{row.temp_bytes / GB:.1f}"),
    ("total GB", "r", lambda row: f"{row.total_bytes / GB:.1f}"),
    ("fits", "l", lambda row: "yes" if row.fits_at_paper_batch else ("with accumulation" if row.fits else "no")),
)
"""The markdown table's columns: header, alignment and cell of a row; sizes in GB (10⁹ bytes) per device."""


def fit_table(rows: list[FitRow]) -> tuple[str, str]:
    """``(markdown, csv)`` of the fit rows."""
    note = (
        "Per-device memory planned on CPU by XLA (virtual devices; a train step with the run's Levanter mesh, "
        "mixed precision and batch; downstream, lm-eval's forward pass on one GPU). A step fits below the "
        f"share of the GPU's memory that a job's JAX reserves ({gpu_memory_fraction():.0%}: usable GB). "
        "micro-batch = examples per device per forward/backward (Levanter per_device_parallelism; downstream, "
        "requests per forward pass)."
    )
    columns, align, cells = zip(*MARKDOWN_COLUMNS, strict=True)
    markdown = markdown_table(columns, ([cell(row) for cell in cells] for row in rows), "".join(align))
    return f"{note}\n\n{markdown}\n", csv_text(map(dataclasses.asdict, rows), FIT_COLUMNS)


def per_device_bytes(tree) -> int:
    """Bytes one device holds of the abstract, sharded arrays of ``tree`` (each leaf's shard shape)."""
    import jax

    return sum(
        math.prod(leaf.shape if leaf.sharding is None else leaf.sharding.shard_shape(leaf.shape)) * leaf.dtype.itemsize
        for leaf in jax.tree_util.tree_leaves(tree)
        if isinstance(leaf, jax.ShapeDtypeStruct)
    )


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


def plan_columns(model, trainable, opt_state, plan) -> dict[str, int]:
    """The ``PLAN_BYTES`` of a compiled ``plan`` whose state is the abstract, laid-out ``model``, its ``trainable``
    part and ``opt_state`` (None: nothing)."""
    from pipeline.models.param_count import count_leaves
    from pipeline.train.step_plan import compiled_peak_bytes

    return {
        "parameters": count_leaves(model),
        "trainable_parameters": count_leaves(trainable),
        "param_bytes": per_device_bytes(model),
        "replicated_param_bytes": sum(replicated_parameters(model).values()),
        "optimizer_bytes": per_device_bytes(opt_state),
        "temp_bytes": int(plan.temp_size_in_bytes),
        "total_bytes": compiled_peak_bytes(plan),
    }


def plan_train_step(workload: Workload, vocab_size: int, micro_batch: int) -> dict[str, int]:
    """XLA's per-device plan of ``workload``'s train step (a pretraining run, memory probe or fine-tune) with
    ``micro_batch`` examples per device per forward/backward: the training loop's own ``UndonatedTrainer``
    (optimizer, mixed precision, FSDP mesh and axis mapping) on this process's devices. A fine-tune's model is its
    source's, passed through its own ``resample`` and ``trainable_filter`` (LoRA: optimizer state for the adapters
    and embeddings only)."""
    import equinox as eqx
    import jax.random as jrandom
    import levanter
    from haliax import Axis
    from haliax.partitioning import round_axis_for_partitioning
    from levanter.models.lm_model import compute_next_token_loss

    from pipeline.models.checkpoint import run_model_config
    from pipeline.train.setup import optimizer_config, trainer_config
    from pipeline.train.step_plan import abstract_train_step_plan
    from pipeline.train.trainer import UndonatedTrainer

    train = dataclasses.replace(workload.train, micro_batch_size=micro_batch)
    model_config = run_model_config(workload.run)
    with tempfile.TemporaryDirectory(prefix=f"{workload.run_id}-fit-") as scratch:
        config = trainer_config(workload.run_id, train, Path(scratch))
        levanter.initialize(config)
        with UndonatedTrainer(config, optimizer_config(train).build(train.steps), compute_next_token_loss) as trainer:
            model_key, training_key = jrandom.split(jrandom.PRNGKey(train.seed))
            Vocab = round_axis_for_partitioning(Axis("vocab", vocab_size), trainer.parameter_axis_mapping)

            def model_init():
                return workload.adapted(model_config.build(Vocab, key=model_key), model_key)

            trainable = workload.trainable_filter()
            is_trainable = True if trainable is None else trainable(eqx.filter_eval_shape(model_init))
            state, plan = abstract_train_step_plan(
                trainer,
                model_init,
                vocab_size,
                workload.run.model.seq_len,
                vocab_size - 1,
                training_key,
                is_trainable=is_trainable,
            )
    return plan_columns(state.model, state.trainable_model, state.opt_state, plan)


def plan_downstream(workload: Workload, vocab_size: int, batch_size: int) -> dict[str, int]:
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

    def is_abstract(leaf) -> bool:
        return isinstance(leaf, jax.ShapeDtypeStruct)

    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    spec = workload.run
    model = eqx.filter_eval_shape(run_model_config(spec).build, Axis("vocab", vocab_size), key=jax.random.PRNGKey(0))
    model = eqx.filter_eval_shape(jmp.get_policy(spec.train.mixed_precision).cast_to_compute, model)
    lm = LevanterLM(model, None, batch_size=batch_size)
    arrays, static = eqx.partition(lm.model, is_abstract, is_leaf=is_abstract)
    arrays = jax.tree_util.tree_map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=device), arrays)
    rows = (batch_size, spec.model.seq_len)
    tokens = hax.NamedArray(
        jax.ShapeDtypeStruct(rows, jnp.int32, sharding=device), (Axis("batch", batch_size), lm.model.Pos)
    )
    targets = jax.ShapeDtypeStruct(rows, jnp.int32, sharding=device)
    scored = jax.ShapeDtypeStruct(rows, jnp.bool_, sharding=device)

    def score(arrays, tokens, targets, scored):
        return lm._scores(eqx.combine(arrays, static, is_leaf=is_abstract), tokens, targets, scored)

    # The harness's filter_jit takes concrete arrays only; an outer jit carries the abstract ones into it.
    plan = jax.jit(score).lower(arrays, tokens, targets, scored).compile().memory_analysis()
    return plan_columns(arrays, None, None, plan)


def plans_in_subprocess(requests: list[tuple[Workload, int, int]], gpus: int) -> list[dict[str, int]]:
    """The plan of each ``(workload, vocab_size, micro_batch)`` request (downstream: ``micro_batch`` requests per
    forward pass), in order, in one fresh Python process whose JAX sees ``gpus`` virtual CPU devices."""
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={gpus}".strip(),
    }
    payload = [[workload.to_dict(), vocab_size, micro_batch] for workload, vocab_size, micro_batch in requests]
    command = [sys.executable, "-m", "pipeline.planning.fit"]
    finished = subprocess.run(command, env=env, input=json.dumps(payload), capture_output=True, text=True)
    if finished.returncode != 0:
        lines = finished.stderr.strip().splitlines() or ["no error message"]
        raise RuntimeError(f"planning on {gpus} virtual devices failed: {lines[-1]}")
    return json.loads(finished.stdout.splitlines()[-1])


def plan_main() -> None:
    """``python -m pipeline.planning.fit``: the plans of the ``[workload, vocab, micro-batch]`` requests on stdin
    (``plans_in_subprocess``), one after another, printed as one JSON line; each one's compiled programs are dropped
    before the next."""
    import jax

    plans = []
    for raw, vocab, micro_batch in json.load(sys.stdin):
        workload = Workload.from_dict(raw)
        try:
            planner = plan_train_step if workload.trains else plan_downstream
            plans.append(planner(workload, vocab, micro_batch))
        except Exception as error:
            raise RuntimeError(
                f"{workload.run_id} at micro-batch {micro_batch}: {type(error).__name__}: {error}".replace("\n", " ")
            ) from error
        jax.clear_caches()
    print(json.dumps(plans))


def fit_run(workload: Workload, vocab_size: int, gpus: int, device_bytes: int, plan: dict[str, Any]) -> FitRow:
    """The workload's row from its ``plan`` at the whole batch per device; a train step that does not fit is
    planned again at the largest micro-batch (a divisor of the per-device batch) that the plan's temporaries,
    scaled linearly with the micro-batch, predict to fit, lowered further until XLA's plan fits (or one example per
    device does not). Downstream rows are planned at lm-eval's batch only."""
    devices = workload.devices(gpus)
    per_device = workload.batch_size // devices
    micro_batch = per_device
    usable = int(device_bytes * gpu_memory_fraction())
    fits_at_batch = plan["total_bytes"] <= usable
    while workload.trains and plan["total_bytes"] > usable and micro_batch > 1:
        fixed = plan["total_bytes"] - plan["temp_bytes"]
        predicted = max(1, int(micro_batch * (usable - fixed) / plan["temp_bytes"]))
        micro_batch = max(d for d in range(1, micro_batch) if per_device % d == 0 and d <= predicted)
        plan = plans_in_subprocess([(workload, vocab_size, micro_batch)], devices)[0]
        logger.info(
            "%s: micro-batch %d plans %.1f GB per device", workload.run_id, micro_batch, plan["total_bytes"] / 1e9
        )
    return FitRow(
        run_id=workload.run_id,
        plan_key=plan_key(workload, vocab_size),
        role=workload.kind,
        family=workload.run.model.family,
        size=workload.run.size,
        time_embed_dim=workload.run.model.time_embed_dim,
        seq_len=workload.run.model.seq_len,
        batch_size=workload.batch_size,
        gpus=devices,
        per_device_batch=per_device,
        micro_batch=micro_batch,
        accumulation=per_device // micro_batch,
        **{key: plan[key] for key in PLAN_BYTES},
        device_bytes=device_bytes,
        usable_bytes=usable,
        fits=plan["total_bytes"] <= usable,
        fits_at_paper_batch=fits_at_batch,
    )


def fit_rows(jobs: list[tuple[Workload, int, int]], vocab_sizes: list[int]) -> list[FitRow]:
    """The rows of ``jobs`` (``(workload, GPUs, device bytes)``, vocabulary sizes ``vocab_sizes``): every first
    plan, at the whole batch per device, in one process per device count, then each row's micro-batch search."""
    requests, devices = [], []
    for (workload, gpus, _), vocab in zip(jobs, vocab_sizes, strict=True):
        devices.append(workload.devices(gpus))
        if workload.batch_size % devices[-1]:
            raise ValueError(
                f"{workload.run_id}: batch_size {workload.batch_size} is not divisible by {devices[-1]} "
                f"GPUs; choose a GPU count that divides it."
            )
        requests.append((workload, vocab, workload.batch_size // devices[-1]))
    plans: dict[int, dict[str, Any]] = {}
    progress = Progress("fit: first plans", len(requests), "rows", every_s=0)
    for count in sorted(set(devices)):
        same = [i for i, devices_of_job in enumerate(devices) if devices_of_job == count]
        plans.update(zip(same, plans_in_subprocess([requests[i] for i in same], count), strict=True))
        progress.advance(len(same), note=f"{count} device(s) done")
    rows = []
    for i, (workload, gpus, device_bytes) in enumerate(jobs):
        rows.append(fit_run(workload, vocab_sizes[i], gpus, device_bytes, plans[i]))
        logger.info("%s: %s", workload.run_id, json.dumps(dataclasses.asdict(rows[-1])))
    return rows


def planned_jobs(
    grid: Grid,
    device: str | None,
    gpus: int | None,
    site: Site | None,
    run_ids: list[str] | None = None,
    preflight_table: Path | None = None,
) -> list[tuple[Workload, int, int]]:
    """``(workload, GPUs, device bytes)`` of every workload of ``grid`` (or of ``run_ids``): on ``gpus`` GPUs of
    ``device``, or, given a ``site``, of the site's memory on each GPU count its job may get there
    (``pipeline.planning.jobs``): a pretraining run's and a fine-tune's as sized before the preflight and, where
    ``preflight_table`` exists, after its measured throughput resized it (both, so that the table has the row its job
    reads either way); a memory probe's one node's; a downstream job's one."""
    from pipeline.planning.jobs import JobSizing

    if site is None and device not in DEVICES:
        raise ValueError(f"--device {device!r}: unknown GPU; expected one of {sorted(DEVICES)}.")
    known = grid.workloads
    unknown = sorted(set(run_ids or []) - set(known))
    if unknown:
        raise ValueError(
            f"--runs {', '.join(unknown)}: not a pretraining run, memory probe, fine-tune or "
            f"downstream-<run> of preset {grid.config['preset']!r}; expected some of {', '.join(known)}."
        )
    chosen = [known[run_id] for run_id in run_ids or known]
    if site is None:
        return [(workload, gpus, DEVICES[device].memory_bytes) for workload in chosen]
    if site.gpus_per_node == 0:
        raise ValueError("--site: the site has no GPUs (gpus_per_node 0); there is no GPU memory to plan for.")
    sizings = [JobSizing(grid, site)]
    if preflight_table is not None and Path(preflight_table).is_file():
        sizings.append(JobSizing(grid, site, preflight_table=preflight_table))
    return [
        (workload, count, site.gpu_memory_bytes)
        for workload in chosen
        for count in dict.fromkeys(sizing.gpu_count(workload.run_id) for sizing in sizings)
    ]


def plans_digest(
    grid: Grid, device: str | None, gpus: int | None, site: Site | None, preflight_table: Path | None = None
) -> str:
    """A hash of every row the fit table of the preset's ``grid`` would hold (run, ``plan_key``, GPUs, memory and the
    share JAX may use): the ``fit`` rule's parameter, so that Snakemake plans again when the preset or the site changes
    what a row means (a preflight report that resizes a job included), and not when only learning rates or step
    counts change."""
    rows = sorted(
        (
            workload.run_id,
            plan_key(workload, vocab_size(grid.config, workload.tokenizer)),
            count,
            device_bytes,
            int(device_bytes * gpu_memory_fraction()),
        )
        for workload, count, device_bytes in planned_jobs(grid, device, gpus, site, preflight_table=preflight_table)
    )
    return json_digest(rows, length=16)


def write_fit(
    grid: Grid,
    device: str | None,
    gpus: int | None,
    run_ids: list[str] | None,
    out_md: Path,
    out_csv: Path,
    site: Site | None = None,
    preflight_table: Path | None = None,
) -> list[FitRow]:
    """Plan the jobs of ``planned_jobs`` and write the fit table. With ``run_ids``, the new rows replace the rows of
    the same jobs in an existing ``out_csv`` and the others are kept; without, the table holds the new rows only.
    Returns the new rows."""
    from pipeline.artifacts import atomic_write_text
    from pipeline.planning.measured import read_fit_rows

    jobs = planned_jobs(grid, device, gpus, site, run_ids, preflight_table)
    rows = fit_rows(jobs, [vocab_size(grid.config, workload.tokenizer) for workload, _, _ in jobs])
    kept = []
    if run_ids and Path(out_csv).is_file():
        replaced = {row.job_key for row in rows}
        kept = [row for row in read_fit_rows(out_csv) if row.job_key not in replaced]
    markdown, table = fit_table(kept + rows)
    atomic_write_text(out_csv, table)
    atomic_write_text(out_md, markdown)
    return rows


if __name__ == "__main__":
    plan_main()
