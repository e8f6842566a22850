"""Data: hub prefetch -> corpus export -> tokenizer -> Levanter token cache (docs/paper.md#data)."""


rule prefetch:
    input:
        PREFETCH_RECORDS,


rule prefetch_dataset:
    output:
        f"{PREFETCH}/datasets/{{dataset}}.json",
    params:
        item=lambda wildcards: json.dumps(HUB_DATASETS[wildcards.dataset], sort_keys=True),
    log:
        f"{RESULTS}/logs/prefetch/datasets/{{dataset}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/prefetch/datasets/{{dataset}}.tsv"
    shell:
        "HF_HUB_OFFLINE=0 HF_DATASETS_OFFLINE=0 python -m pipeline prefetch --dataset {params.item:q} --out {output:q}"
        " > {log:q} 2>&1"


rule prefetch_tokenizer:
    output:
        f"{PREFETCH}/tokenizers/{{tokenizer}}.json",
    params:
        item=lambda wildcards: json.dumps(HUB_TOKENIZERS[wildcards.tokenizer], sort_keys=True),
    log:
        f"{RESULTS}/logs/prefetch/tokenizers/{{tokenizer}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/prefetch/tokenizers/{{tokenizer}}.tsv"
    shell:
        "HF_HUB_OFFLINE=0 HF_DATASETS_OFFLINE=0 python -m pipeline prefetch --tokenizer {params.item:q}"
        " --out {output:q} > {log:q} 2>&1"


rule prefetch_task:
    output:
        f"{PREFETCH}/lm_eval/{{task}}.json",
    params:
        task_dir=["--task-dir", str(EVALUATE_TASK_DIR)] if EVALUATE_TASK_DIR is not None else [],
        revisions=json.dumps(config["downstream"].get("revisions", {}), sort_keys=True),
    log:
        f"{RESULTS}/logs/prefetch/lm_eval/{{task}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/prefetch/lm_eval/{{task}}.tsv"
    shell:
        "HF_HUB_OFFLINE=0 HF_DATASETS_OFFLINE=0 python -m pipeline prefetch-task --task {wildcards.task:q}"
        " {params.task_dir:q} --revisions {params.revisions:q} --out {output:q} > {log:q} 2>&1"


# The hub is reached only where the network is: on the submit host.
localrules:
    prefetch,
    prefetch_dataset,
    prefetch_tokenizer,
    prefetch_task,


rule data_rate:
    input:
        prefetched=dataset_prefetched,
        tokenizers=slice_tokenizers,
    output:
        f"{RESULTS}/{SITE_RATES}/{{dataset}}.json",
    params:
        source=corpus_source,
        prefetched=prefetched_option,
    log:
        f"{RESULTS}/logs/data_rate/{{dataset}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/data_rate/{{dataset}}.tsv"
    resources:
        **cpu_resources("data_rate"),
    shell:
        "python -m pipeline data-rate --source {params.source:q} {params.prefetched:q} --out {output:q}"
        " {input.tokenizers:q} > {log:q} 2>&1"


rule corpus:
    input:
        unpack(data_rate_input),
        prefetched=dataset_prefetched,
    output:
        directory(f"{DATA}/corpora/{{dataset}}"),
    params:
        source=corpus_source,
        prefetched=prefetched_option,
    log:
        f"{RESULTS}/logs/corpus/{{dataset}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/corpus/{{dataset}}.tsv"
    resources:
        **cpu_resources("corpus"),
        attempt=lambda wildcards, attempt: attempt,  # a retry runs only after a walltime stop or a preemption
    retries: chain_retries(rule="corpus")
    shell:
        "python -m pipeline corpus --source {params.source:q} {params.prefetched:q} --out {output:q}"
        " --attempt {resources.attempt:q} > {log:q} 2>&1"


rule tokenizer:
    input:
        corpora=tokenizer_corpora,
        prefetched=tokenizer_prefetched,
    output:
        directory(f"{DATA}/tokenizers/{{tokenizer}}"),
    params:
        spec=tokenizer_spec,
        prefetched=prefetched_option,
    log:
        f"{RESULTS}/logs/tokenizer/{{tokenizer}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/tokenizer/{{tokenizer}}.tsv"
    resources:
        **cpu_resources("tokenizer"),
    shell:
        "python -m pipeline tokenizer --spec {params.spec:q} {params.prefetched:q} --out {output:q} {input.corpora:q}"
        " > {log:q} 2>&1"


rule token_cache:
    input:
        unpack(data_rate_input),
        corpus=f"{DATA}/corpora/{{dataset}}",
        tokenizer=f"{DATA}/tokenizers/{{tokenizer}}",
    output:
        directory(f"{DATA}/caches/{{dataset}}-{{tokenizer}}"),
    params:
        builder=config["cache_builder"],
    log:
        f"{RESULTS}/logs/token_cache/{{dataset}}-{{tokenizer}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/token_cache/{{dataset}}-{{tokenizer}}.tsv"
    resources:
        **cpu_resources("token_cache"),
        attempt=lambda wildcards, attempt: attempt,
    retries: chain_retries(rule="token_cache")
    shell:
        "python -m pipeline cache --corpus {input.corpus:q} --tokenizer {input.tokenizer:q}"
        " --builder {params.builder:q} --out {output:q} --attempt {resources.attempt:q} > {log:q} 2>&1"
