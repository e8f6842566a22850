"""Data: hub prefetch -> corpus export -> tokenizer -> Levanter token cache (docs/paper.md#data)."""


rule prefetch:
    output:
        manifest=PREFETCH_MANIFEST,
    params:
        hub_items=json.dumps(HUB_ITEMS, sort_keys=True),
        task_dir=["--task-dir", str(EVALUATE_TASK_DIR)] if EVALUATE_TASK_DIR is not None else [],
    log:
        f"{RESULTS}/logs/prefetch.log",
    shell:
        "HF_HUB_OFFLINE=0 HF_DATASETS_OFFLINE=0 python -m pipeline prefetch --items {params.hub_items:q}"
        " {params.task_dir:q} --out {output.manifest:q} > {log:q} 2>&1"


# The hub is reached only where the network is: on the submit host.
localrules:
    prefetch,


rule corpus:
    input:
        prefetched=PREFETCHED,
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
    shell:
        "python -m pipeline corpus --source {params.source:q} {params.prefetched:q} --out {output:q} > {log:q} 2>&1"


rule tokenizer:
    input:
        corpora=tokenizer_corpora,
        prefetched=PREFETCHED,
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
    shell:
        "python -m pipeline cache --corpus {input.corpus:q} --tokenizer {input.tokenizer:q}"
        " --builder {params.builder:q} --out {output:q} > {log:q} 2>&1"
