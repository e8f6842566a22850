"""Pretraining: every GPT / Llama / DiffEqFormer / weight-sharing run of the grid (Tables 1-3, ablations)."""


rule pretrain:
    input:
        unpack(run_inputs),
        unpack(sized_by("fit", "preflight")),
    output:
        summary=f"{RESULTS}/runs/{{run}}/summary.json",
    params:
        spec=lambda wildcards: RUNS[wildcards.run].to_json(),
        train_step=TRAIN_STEP,  # a new train-step version reruns results trained by an older one
        run_dir=lambda wildcards: f"{RESULTS}/runs/{wildcards.run}",
    log:
        f"{RESULTS}/logs/pretrain/{{run}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/pretrain/{{run}}.tsv"
    resources:
        **training_resources("run"),
        attempt=lambda wildcards, attempt: attempt,  # a retry trains only after a walltime stop or a preemption
    retries: chain_retries(RUNS)
    shell:
        "python -m pipeline pretrain --spec {params.spec:q} --run-dir {params.run_dir:q}"
        " --cache {input.cache:q} --tokenizer {input.tokenizer:q} --gpus {resources.gpu:q}"
        " --micro-batch {resources.micro_batch:q}"
        " --attempt {resources.attempt:q} > {log:q} 2>&1"
