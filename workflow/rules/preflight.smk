"""The preflight (`snakemake preflight`): one short job per distinct training job shape of the preset, on the GPUs,
memory and micro-batch its runs get, measured and projected onto the grid, then one fine-tune (LoRA, full), lm-eval
and analysis job each on those jobs' checkpoints (pipeline/preflight/). Its rows feed the
cost preview and every training job's walltime; a red row stops the grid's dry run (pipeline/planning/jobs.py).
Above the rules: the shapes, sized like the grid's runs, and each job's inputs, settings and resources."""

import functools
import os

from pipeline.planning.slurm_resources import preflight_walltime
from pipeline.preflight.shapes import PREFLIGHT_RUNTIME_MIN, run_shapes, training_shapes
from pipeline.preflight.stages import STAGE_KINDS, stage_jobs

PREFLIGHT = f"{RESULTS}/preflight"
PREFLIGHT_DEVICE = SITE.device if SITE is not None else "cpu"


wildcard_constraints:
    shape="[a-z0-9_.]+-[a-z0-9_.]+-g[0-9]+-mb[0-9]+",
    kind=one_of(STAGE_KINDS),


@functools.cache
def preflight_shapes():
    """The shapes, sized like the grid's runs (with a site: from the fit table, which must exist by now)."""
    try:
        return training_shapes(config, JOBS)
    except ValueError as error:
        raise WorkflowError(str(error)) from None


@functools.cache
def preflight_stage_jobs():
    """The fine-tune, lm-eval and analysis jobs, each on the preflight checkpoint of its source run's shape."""
    return stage_jobs(config, run_shapes(preflight_shapes()))


def preflight_shape(wildcards):
    return preflight_shapes()[wildcards.shape]


def preflight_job_inputs(wildcards):
    return run_data(preflight_shape(wildcards).run_id)


def preflight_plan_option(wildcards):
    """The fit row's plan of the shape's job (with a site), else none: the job plans itself."""
    shape = preflight_shape(wildcards)
    row = JOBS.fit_row(shape.run_id, shape.gpus) if SITE is not None and shape.gpus else None
    return [] if row is None else ["--planned-bytes", row["total_bytes"], "--budget-bytes", row["usable_bytes"]]


def preflight_job_resources():
    """A preflight job is sized as the run it trains, for its shape's own walltime (pipeline/preflight/shapes.py)."""

    def shape_of(wildcards):
        preflight = preflight_shape(wildcards)
        shape = JOBS.training(preflight.run_id, check_preflight=False)
        return preflight_walltime(shape, preflight.minutes)

    return rule_resources(shape_of, "training")


def preflight_stage_inputs(wildcards):
    """The source shape's preflight row (its checkpoint beside it), the tokenizer, and the token cache: a fine-tune's
    target's, else the source run's; lm-eval also its task files and prefetch records."""
    job = preflight_stage_jobs()[wildcards.kind]
    inputs = {"source": f"{PREFLIGHT}/{job.source_shape}/row.json"}
    if job.kind.startswith("finetune-"):
        spec = FINETUNE_RUNS[job.run_id]
        inputs |= {
            "cache": f"{DATA}/caches/{spec.target_dataset}-{spec.tokenizer}",
            "tokenizer": f"{DATA}/tokenizers/{spec.tokenizer}",
        }
    else:
        inputs |= run_data(job.run_id)
    if job.kind == "downstream":
        inputs |= {
            "task_files": EVALUATE_TASK_FILES,
            "prefetched": [f"{PREFETCH}/lm_eval/{task}.json" for task in HUB_ITEMS["lm_eval_tasks"]],
        }
    return inputs


def preflight_stage_settings(wildcards, input):
    """What the stage's verb is given besides paths, as JSON: the fine-tune's spec, or the preset's section."""
    job = preflight_stage_jobs()[wildcards.kind]
    if job.kind.startswith("finetune-"):
        return FINETUNE_RUNS[job.run_id].to_json()
    if job.kind == "downstream":
        task_dir = None if EVALUATE_TASK_DIR is None else str(EVALUATE_TASK_DIR)
        settings = {**config["downstream"], "task_dir": task_dir, "pair": EVALUATED_RUN_PAIR[job.run_id]}
        return json.dumps({**settings, "prefetched": [os.path.abspath(path) for path in input.prefetched]})
    return json.dumps(config["analysis"][job.kind])


def preflight_stage_shape(wildcards):
    """A stage job's shape: its fine-tune's or analysis's, for ``PREFLIGHT_RUNTIME_MIN`` minutes."""
    job = preflight_stage_jobs()[wildcards.kind]
    if job.kind.startswith("finetune-"):
        shape = JOBS.training(job.run_id, check_preflight=False)
    else:
        shape = JOBS.gpu_analysis(job.kind, job.run_id, check_preflight=False)
    return preflight_walltime(shape, PREFLIGHT_RUNTIME_MIN)


rule preflight_job:
    input:
        unpack(preflight_job_inputs),
    output:
        row=f"{PREFLIGHT}/{{shape}}/row.json",
    params:
        spec=lambda wildcards: RUNS[preflight_shape(wildcards).run_id].to_json(),
        runs=lambda wildcards: len(preflight_shape(wildcards).runs),
        job_dir=lambda wildcards: f"{PREFLIGHT}/{wildcards.shape}",
        device=PREFLIGHT_DEVICE,
        plan=preflight_plan_option,
        options=[f"--{key}={value}" for key, value in sorted(config.get("preflight", {}).items())],
    log:
        f"{RESULTS}/logs/preflight/{{shape}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/preflight/{{shape}}.tsv"
    resources:
        **preflight_job_resources(),
    shell:
        "python -m pipeline preflight-job --spec {params.spec:q} --shape {wildcards.shape:q} --runs {params.runs:q}"
        " --job-dir {params.job_dir:q} --cache {input.cache:q} --tokenizer {input.tokenizer:q}"
        " --micro-batch {resources.micro_batch:q} --gpus {resources.gpu:q} --device-label {params.device:q}"
        " {params.plan:q} {params.options:q} --row {output.row:q} > {log:q} 2>&1"


rule preflight_stage:
    input:
        unpack(preflight_stage_inputs),
    output:
        row=f"{PREFLIGHT}/stages/{{kind}}/row.json",
    params:
        run_id=lambda wildcards: preflight_stage_jobs()[wildcards.kind].run_id,
        runs=lambda wildcards: preflight_stage_jobs()[wildcards.kind].runs,
        source_shape=lambda wildcards: preflight_stage_jobs()[wildcards.kind].source_shape,
        job_dir=lambda wildcards: f"{PREFLIGHT}/stages/{wildcards.kind}",
        source_dir=lambda wildcards: f"{PREFLIGHT}/{preflight_stage_jobs()[wildcards.kind].source_shape}/train",
        settings=preflight_stage_settings,
        micro_batch=lambda wildcards: preflight_stage_shape(wildcards).micro_batch or 0,
        device=PREFLIGHT_DEVICE,
    log:
        f"{RESULTS}/logs/preflight/stages/{{kind}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/preflight/stages/{{kind}}.tsv"
    resources:
        **rule_resources(preflight_stage_shape, "gpu"),
    shell:
        "python -m pipeline preflight-stage --kind {wildcards.kind:q} --run-id {params.run_id:q}"
        " --runs {params.runs:q} --source-shape {params.source_shape:q}"
        " --source-dir {params.source_dir:q} --settings {params.settings:q} --job-dir {params.job_dir:q}"
        " --cache {input.cache:q} --tokenizer {input.tokenizer:q} --micro-batch {params.micro_batch:q}"
        " --gpus {resources.gpu:q} --device-label {params.device:q} --row {output.row:q} > {log:q} 2>&1"


rule preflight:
    input:
        rows=lambda wildcards: [f"{PREFLIGHT}/{shape}/row.json" for shape in preflight_shapes()]
        + [f"{PREFLIGHT}/stages/{kind}/row.json" for kind in preflight_stage_jobs()],
    output:
        md=f"{RESULTS}/preflight.md",
        csv=f"{RESULTS}/preflight.csv",
        html=report(
            f"{RESULTS}/preflight.html",
            caption="../report/preflight.rst",
            category="Preflight",
            labels={"table": "Preflight"},
        ),
        projection=f"{RESULTS}/preflight-projection.csv",
    params:
        preset=PRESET,
        shapes=lambda wildcards: json.dumps(
            {
                shape_id: {"runs": list(shape.runs), "gpus": shape.gpus}
                for shape_id, shape in preflight_shapes().items()
            }
        ),
        device=PREFLIGHT_DEVICE,
        mfu=SITE.mfu if SITE is not None else 0.4,
        safety=SITE.safety_factor if SITE is not None else 1.0,
    log:
        f"{RESULTS}/logs/preflight/report.log",
    benchmark:
        f"{RESULTS}/benchmarks/preflight/report.tsv"
    resources:
        **TIDY_FILE_RESOURCES,
    localrule: True
    shell:
        "python -m pipeline preflight-report --preset {params.preset:q} --rows {input.rows:q}"
        " --shapes {params.shapes:q} --device-label {params.device:q} --mfu {params.mfu:q} --safety-factor {params.safety:q}"
        " --md {output.md:q} --csv {output.csv:q} --html {output.html:q} --projection {output.projection:q}"
        " > {log:q} 2>&1"
