"""Fit preview: does every run fit in one GPU's memory, planned on CPU by XLA before anything runs.

One row per workload, its ``role`` (the workload's kind):

- ``pretrain`` / ``probe``: a pretraining run's (memory probe's) train step. The training loop's own Levanter
  ``UndonatedTrainer`` (optimizer, mixed-precision policy, FSDP mesh and axis mapping) is laid out on ``gpus``
  virtual CPU devices (``--xla_force_host_platform_device_count``), the model is built abstractly at its exact
  dimensions (GPT-2's 50257 or Llama-2's 32000 vocabulary, real seq_len, D and S; nothing allocated or downloaded) and
  the train step is compiled.
- ``finetune``: the same train step for a fine-tune (its batch and optimizer), whose model is the source run's,
  built abstractly and passed through the fine-tune's own ``resample`` (discretised to N' Euler steps, LoRA
  adapters) and ``trainable_filter``: with LoRA the optimizer holds state for the adapters and embeddings only and
  Levanter keeps the frozen weights in the compute precision. No source checkpoint is read.
- ``downstream``: lm-eval's scoring forward pass (``pipeline.evaluate.harness.LevanterLM``, inference mode) on the
  trained run's model in its compute precision, on the downstream job's one GPU (the model unsharded), compiled
  for ``BATCH_SIZE`` requests at the full seq_len (the harness's longest bucket); no optimizer state.

XLA's memory plan per device is

    total = arguments + outputs + temporaries − donated (aliased) bytes      (``pipeline.train.step_plan``)

of which the parameters and the optimizer state are the per-device shards of the state (FSDP: Levanter's
parameter axis mapping shards every array with an ``embed`` axis over the devices; the few without one, biases and
the time-embedding MLPs' hidden layers, are replicated and listed as ``replicated_param_bytes``; downstream, the
whole model is on its one device). A workload fits when total ≤ the share of the device's memory that a job's JAX
reserves (``pipeline.execution.job_env.gpu_memory_fraction()``, 0.9: ``usable_bytes``). A train step that does not
fit at its batch is planned again with gradient accumulation: Levanter's ``per_device_parallelism`` (examples per
device per forward/backward) halved until the step fits; the batch the paper reports is unchanged (the
micro-batches' gradients are summed). The temporaries are XLA's CPU plan: the GPU compiler fuses and schedules
differently, so the table is a preview, and the memory probes (Fig. 16) measure the real peak on GPUs.

Each training workload is planned on ``gpus`` GPUs of a named device, or, given a SLURM site (``--site``), on the
GPUs ``pipeline.planning.jobs`` gives its job (a memory probe: one node's) of the site's GPU memory; the SLURM jobs
then train at the micro-batch of their row (``pipeline.planning.jobs.JobSizing.micro_batch``).

A row is one job's: it is found by ``(run_id, gpus, device_bytes)`` and holds for the run as the preset defines it
only while its ``plan_key`` (a hash of what the plan depends on) and its ``usable_bytes`` are the current ones;
otherwise job sizing refuses it as stale, naming what changed (``pipeline.planning.fit_table``). ``--runs`` merges
its rows into an existing table.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

from pipeline.config.site import Site
from pipeline.execution.job_env import gpu_memory_fraction
from pipeline.execution.progress import Progress
from pipeline.planning.devices import DEVICES
from pipeline.planning.fit_table import FIT_COLUMNS, FitRow, fit_table, plan_key
from pipeline.planning.grid import Grid, Workload, workload_vocab_size
from pipeline.planning.plans import plans_in_subprocess
from pipeline.train.digests import json_digest

logger = logging.getLogger(__name__)
PLAN_BYTES = FIT_COLUMNS[FIT_COLUMNS.index("parameters") : FIT_COLUMNS.index("device_bytes")]
"""What a plan (``pipeline.planning.plans``) gives a fit row: parameter counts and bytes per device."""


def fit_run(workload: Workload, vocab_size: int, gpus: int, device_bytes: int, plan: dict[str, Any]) -> FitRow:
    """The workload's row from its ``plan`` at the whole batch per device; a train step that does not fit is
    planned again at the largest micro-batch (a divisor of the per-device batch) that the plan's temporaries,
    scaled linearly with the micro-batch, predict to fit, halved further until XLA's plan fits (or one example per
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


def fit_rows(chosen: list[Workload], vocab_sizes: list[int], gpus: list[int], device_bytes: int) -> list[FitRow]:
    """The rows of ``chosen`` (vocabulary sizes ``vocab_sizes``, training jobs of ``gpus`` GPUs): every first plan,
    at the whole batch per device, in one process per device count, then each row's micro-batch search."""
    for workload, count in zip(chosen, gpus, strict=True):
        devices = workload.devices(count)
        if workload.batch_size % devices:
            raise ValueError(
                f"{workload.run_id}: batch_size {workload.batch_size} is not divisible by {devices} "
                f"GPUs; choose a GPU count that divides it."
            )
    requests = [
        (workload, vocab_size, workload.batch_size // workload.devices(count))
        for workload, vocab_size, count in zip(chosen, vocab_sizes, gpus, strict=True)
    ]
    plans: dict[int, dict[str, Any]] = {}
    progress = Progress("fit: first plans", len(requests), "rows", every_s=0)
    for devices in sorted({workload.devices(count) for workload, count in zip(chosen, gpus, strict=True)}):
        same = [
            i
            for i, (workload, count) in enumerate(zip(chosen, gpus, strict=True))
            if workload.devices(count) == devices
        ]
        plans.update(zip(same, plans_in_subprocess([requests[i] for i in same], devices), strict=True))
        progress.advance(len(same), note=f"{devices} device(s) done")
    rows = []
    for i, (workload, vocab_size, _) in enumerate(requests):
        rows.append(fit_run(workload, vocab_size, gpus[i], device_bytes, plans[i]))
        logger.info("%s: %s", workload.run_id, json.dumps(dataclasses.asdict(rows[-1])))
    return rows


def site_gpus(
    grid: Grid, site: Site, chosen: list[Workload], preflight_table: Path | None = None
) -> list[tuple[int, ...]]:
    """The GPU counts each workload's job may get at ``site`` (``pipeline.planning.jobs``): a pretraining run's and a
    fine-tune's from its size, as sized before the preflight and, where ``preflight_table`` exists, after its measured
    throughput resized it (both, so that the table has the row its job reads either way); a memory probe's one
    node's; a downstream job's one."""
    from pipeline.planning.jobs import JobSizing

    if site.gpus_per_node == 0:
        raise ValueError("--site: the site has no GPUs (gpus_per_node 0); there is no GPU memory to plan for.")
    sizings = [JobSizing(grid, site)]
    if preflight_table is not None and Path(preflight_table).is_file():
        sizings.append(JobSizing(grid, site, preflight_table=preflight_table))
    return [tuple(dict.fromkeys(jobs.gpu_count(workload.run_id) for jobs in sizings)) for workload in chosen]


def planned_jobs(
    grid: Grid,
    device: str | None,
    gpus: int | None,
    site: Site | None,
    run_ids: list[str] | None = None,
    preflight_table: Path | None = None,
) -> list[tuple[Workload, int, int]]:
    """``(workload, GPUs, device bytes)`` of every workload of ``grid`` (or of ``run_ids``): on ``gpus`` GPUs of
    ``device``, or, given a ``site``, on each GPU count the site may give its job (``site_gpus``), of the site's
    memory."""
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
    return [
        (workload, count, site.gpu_memory_bytes)
        for workload, counts in zip(chosen, site_gpus(grid, site, chosen, preflight_table), strict=True)
        for count in counts
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
            plan_key(workload, workload_vocab_size(grid.config, workload)),
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
    """Plan every workload of the preset's ``grid`` (or those of ``run_ids``) and write the fit table: on ``gpus`` GPUs
    per training job of ``device``, or, given a ``site``, on each GPU count the site may give each job (before and,
    where the preflight report ``preflight_table`` exists, after the preflight resized it), of the site's memory.
    With ``run_ids``, the new rows replace the rows of the same jobs in an existing ``out_csv`` and the others are
    kept; without, the table holds the new rows only. Returns the new rows."""
    from pipeline.artifacts import atomic_write_text
    from pipeline.planning.measured import read_fit_rows

    jobs = planned_jobs(grid, device, gpus, site, run_ids, preflight_table)
    device_bytes = jobs[0][2]
    chosen = [workload for workload, _, _ in jobs]
    rows = fit_rows(
        chosen,
        [workload_vocab_size(grid.config, workload) for workload in chosen],
        [count for _, count, _ in jobs],
        device_bytes,
    )
    kept = []
    if run_ids and Path(out_csv).is_file():
        replaced = {row.job_key for row in rows}
        kept = [row for row in read_fit_rows(out_csv) if row.job_key not in replaced]
    markdown, table = fit_table(kept + rows)
    atomic_write_text(out_csv, table)
    atomic_write_text(out_md, markdown)
    return rows
