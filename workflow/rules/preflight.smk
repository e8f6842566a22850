"""The preflight (`snakemake preflight`): one short job per distinct training job shape of the preset, on the GPUs,
memory and micro-batch its runs get, measured and projected onto the grid, then one fine-tune (LoRA, full), lm-eval
and analysis job each on those jobs' checkpoints (pipeline/preflight/). Its rows feed the
cost preview and every training job's walltime; a red row stops the grid's dry run (pipeline/planning/jobs.py)."""


include: "preflight_jobs.smk"


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
        **rule_resources(preflight_job_shape, JobKind.TRAINING),
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
        run_id=lambda wildcards: PREFLIGHT_STAGES[wildcards.kind].run_id,
        runs=lambda wildcards: PREFLIGHT_STAGES[wildcards.kind].runs,
        job_dir=lambda wildcards: f"{PREFLIGHT}/stages/{wildcards.kind}",
        source_dir=lambda wildcards: f"{PREFLIGHT}/{preflight_source_shape(wildcards)}/train",
        settings=preflight_stage_settings,
        micro_batch=lambda wildcards: preflight_stage_shape(preflight_sizing(), wildcards).micro_batch or 0,
        device=PREFLIGHT_DEVICE,
    log:
        f"{RESULTS}/logs/preflight/stages/{{kind}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/preflight/stages/{{kind}}.tsv"
    resources:
        **rule_resources(preflight_stage_shape, JobKind.GPU),
    shell:
        "python -m pipeline preflight-stage --kind {wildcards.kind:q} --run-id {params.run_id:q}"
        " --runs {params.runs:q} --source-dir {params.source_dir:q} --settings {params.settings:q}"
        " --job-dir {params.job_dir:q} --cache {input.cache:q} --tokenizer {input.tokenizer:q}"
        " --micro-batch {params.micro_batch:q} --gpus {resources.gpu:q} --device-label {params.device:q}"
        " --row {output.row:q} > {log:q} 2>&1"


rule preflight:
    input:
        rows=lambda wildcards: [f"{PREFLIGHT}/{shape}/row.json" for shape in preflight_shapes()]
        + [f"{PREFLIGHT}/stages/{kind}/row.json" for kind in PREFLIGHT_STAGES],
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
        **PRESET_AS_GIVEN,
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
        "python -m pipeline preflight-report --preset {params.preset:q} --overrides {params.overrides:q}"
        " --rows {input.rows:q} --shapes {params.shapes:q} --device-label {params.device:q} --mfu {params.mfu:q} --safety-factor {params.safety:q}"
        " --md {output.md:q} --csv {output.csv:q} --html {output.html:q} --projection {output.projection:q}"
        " > {log:q} 2>&1"
