"""The preflight's jobs (rules in preflight.smk, which includes this file): their shapes, sized like the grid's runs,
its stage jobs, and each job's inputs, settings and resources (the jobs: pipeline/planning/preflight_jobs.py)."""

import functools
import os

from pipeline.planning.jobs import usable_fit_row
from pipeline.planning.preflight_jobs import PREFLIGHT_RUNTIME_MIN, stage_jobs, training_shapes

PREFLIGHT = f"{RESULTS}/preflight"
PREFLIGHT_DEVICE = SITE.device if SITE is not None else "cpu"
PREFLIGHT_STAGES = stage_jobs(GRID)
"""The fine-tune, lm-eval and analysis jobs by kind, each on the preflight checkpoint of its source run's shape."""


wildcard_constraints:
    shape="[a-z0-9_.]+-[a-z0-9_.]+-g[0-9]+-mb[0-9]+",
    kind=one_of(PREFLIGHT_STAGES),


def preflight_sizing():
    """The job sizing the preflight's jobs are sized by; at a site with GPUs the fit table's, planned first."""
    if "fit" in JOBS.tables:
        checkpoints.fit.get()
    return JOBS.reading()


@functools.cache
def sized_shapes(jobs):
    """The shapes, sized like the grid's runs (once per sizing)."""
    try:
        return training_shapes(jobs)
    except ValueError as error:
        raise WorkflowError(str(error)) from None


def preflight_shapes():
    return sized_shapes(preflight_sizing())


def preflight_shape(wildcards):
    return preflight_shapes()[wildcards.shape]


def preflight_source_shape(wildcards):
    return PREFLIGHT_STAGES[wildcards.kind].source_shape(preflight_shapes())


def preflight_job_inputs(wildcards):
    return data_inputs(GRID.pretraining[preflight_shape(wildcards).run_id])


def preflight_plan_option(wildcards):
    """The fit row's plan of the shape's job (with a site), else none: the job plans itself."""
    shape = preflight_shape(wildcards)
    if SITE is None or not shape.gpus:
        return []
    row = usable_fit_row(preflight_sizing().need(GRID.pretraining[shape.run_id]).measured, shape.gpus)
    return [] if row is None else ["--planned-bytes", row.total_bytes, "--budget-bytes", row.usable_bytes]


def preflight_job_shape(jobs, wildcards):
    """A preflight job is sized as the run it trains, for its shape's own walltime (pipeline/planning/preflight_jobs.py)."""
    shape = preflight_shape(wildcards)
    return jobs.training(shape.run_id).for_preflight(shape.minutes)


def preflight_stage_inputs(wildcards):
    """The source shape's preflight row (its checkpoint beside it), the tokenizer, and the token cache: a fine-tune's
    target's, else the source run's; lm-eval also its task files and prefetch records."""
    job = PREFLIGHT_STAGES[wildcards.kind]
    inputs = {"source": f"{PREFLIGHT}/{preflight_source_shape(wildcards)}/row.json", **data_inputs(job.job)}
    if job.lm_eval:
        inputs |= {
            "task_files": EVALUATE_TASK_FILES,
            "prefetched": [f"{PREFETCH}/lm_eval/{task}.json" for task in HUB_ITEMS["lm_eval_tasks"]],
        }
    return inputs


def preflight_stage_settings(wildcards, input):
    """What the stage's verb is given besides paths, as JSON (pipeline/planning/preflight_jobs.py ``StageJob.settings``)."""
    task_dir = None if EVALUATE_TASK_DIR is None else str(EVALUATE_TASK_DIR)
    prefetched = [os.path.abspath(path) for path in input.get("prefetched", [])]
    return PREFLIGHT_STAGES[wildcards.kind].settings(config, {"task_dir": task_dir, "prefetched": prefetched})


def preflight_stage_shape(jobs, wildcards):
    """A stage job's shape: its fine-tune's or analysis's, for ``PREFLIGHT_RUNTIME_MIN`` minutes."""
    shape = PREFLIGHT_STAGES[wildcards.kind].resources(jobs)
    return shape.for_preflight(PREFLIGHT_RUNTIME_MIN)
