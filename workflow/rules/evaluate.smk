"""Evaluation: lm-eval downstream tasks (App. C.7, Tables 4-5), one job per evaluated run (all shot counts)."""

EVALUATE_CONFIG = config["downstream"]


rule downstream:
    input:
        summary=lambda wildcards: run_summary(wildcards.run),
        tokenizer=lambda wildcards: run_inputs(wildcards)["tokenizer"],
        task_files=EVALUATE_TASK_FILES,
        prefetched=[f"{PREFETCH}/lm_eval/{task}.json" for task in HUB_ITEMS["lm_eval_tasks"]],
    output:
        csv=f"{RESULTS}/downstream/{{run}}/downstream.csv",
        results=[f"{RESULTS}/downstream/{{run}}/lm_eval_{k}shot.json" for k in EVALUATE_CONFIG["shots"]],
    params:
        run_dir=lambda wildcards: f"{RESULTS}/runs/{wildcards.run}",
        out_dir=lambda wildcards: f"{RESULTS}/downstream/{wildcards.run}",
        pair=lambda wildcards: EVALUATED_RUN_PAIR[wildcards.run],
        prefetched=prefetched_option,
        tasks=EVALUATE_CONFIG["tasks"],
        shots=EVALUATE_CONFIG["shots"],
        options=(["--task-dir", str(EVALUATE_TASK_DIR)] if EVALUATE_TASK_DIR is not None else [])
        + (["--limit", EVALUATE_CONFIG["limit"]] if EVALUATE_CONFIG["limit"] is not None else []),
    log:
        f"{RESULTS}/logs/downstream/{{run}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/downstream/{{run}}.tsv"
    resources:
        **gpu_analysis_resources("downstream"),
    shell:
        "python -m pipeline downstream --run-dir {params.run_dir:q} --tokenizer {input.tokenizer:q}"
        " --out-dir {params.out_dir:q} --pair {params.pair:q} --tasks {params.tasks:q} --shots {params.shots:q}"
        " {params.options:q} {params.prefetched:q} --gpus {resources.gpu:q} > {log:q} 2>&1"
