"""Step-resampling fine-tunes (paper §6.2, Fig. 5): each source resampled to N' steps, LoRA and full."""


rule finetune:
    input:
        unpack(finetune_inputs),
        unpack(sized_by("fit", "preflight")),
    output:
        summary=f"{RESULTS}/runs/{{finetune}}/summary.json",
    params:
        spec=lambda wildcards: GRID.finetunes[wildcards.finetune].spec.to_json(),
        train_step=TRAIN_STEP,  # a new train-step version reruns results trained by an older one
        run_dir=lambda wildcards: f"{RESULTS}/runs/{wildcards.finetune}",
        source_dir=lambda wildcards: f"{RESULTS}/runs/{GRID.finetunes[wildcards.finetune].run.run_id}",
    log:
        f"{RESULTS}/logs/finetune/{{finetune}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/finetune/{{finetune}}.tsv"
    resources:
        **training_resources("finetune"),
        attempt=lambda wildcards, attempt: attempt,  # a retry trains only after a walltime stop or a preemption
    retries: chain_retries(GRID.finetunes)
    shell:
        "python -m pipeline finetune --spec {params.spec:q} --run-dir {params.run_dir:q}"
        " --source {params.source_dir:q} --cache {input.cache:q} --tokenizer {input.tokenizer:q}"
        " --gpus {resources.gpu:q} --micro-batch {resources.micro_batch:q}"
        " --attempt {resources.attempt:q} > {log:q} 2>&1"
