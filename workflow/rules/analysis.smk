"""Analyses: spectra, Lyapunov token sensitivity, clustering simulation, compute/quality frontier, Table 6,
train-step memory probes (Fig. 16)."""

import json
import os

from pipeline.analysis.tidy import FRONTIER_VERSION

ANALYSIS_CONFIG = config["analysis"]


rule spectra:
    input:
        summary=lambda wildcards: run_summary(wildcards.run),
        tokenizer=lambda wildcards: run_inputs(wildcards)["tokenizer"],
    output:
        csv=f"{ANALYSIS_DIR}/spectra/{{run}}.csv",
        untrained=f"{ANALYSIS_DIR}/spectra_untrained/{{run}}.csv",
    params:
        run_dir=lambda wildcards: f"{RESULTS}/runs/{wildcards.run}",
        oversampling=ANALYSIS_CONFIG["spectra"]["time_oversampling"],
    log:
        f"{RESULTS}/logs/analysis/spectra/{{run}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/analysis/spectra/{{run}}.tsv"
    resources:
        **gpu_analysis_resources("spectra"),
    shell:
        "python -m pipeline spectra --run-dir {params.run_dir:q} --tokenizer {input.tokenizer:q}"
        " --time-oversampling {params.oversampling:q} --out {output.csv:q} --untrained-out {output.untrained:q}"
        " --gpus {resources.gpu:q}"
        " > {log:q} 2>&1"


rule lyapunov:
    input:
        summary=lambda wildcards: run_summary(wildcards.run),
        tokenizer=lambda wildcards: run_inputs(wildcards)["tokenizer"],
    output:
        csv=f"{ANALYSIS_DIR}/lyapunov/{{run}}.csv",
        html=f"{ANALYSIS_DIR}/lyapunov/{{run}}.html",
    params:
        run_dir=lambda wildcards: f"{RESULTS}/runs/{wildcards.run}",
        sentences=json.dumps(ANALYSIS_CONFIG["lyapunov"]["sentences"]),
        output_token=ANALYSIS_CONFIG["lyapunov"]["output_token"],
    log:
        f"{RESULTS}/logs/analysis/lyapunov/{{run}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/analysis/lyapunov/{{run}}.tsv"
    resources:
        **gpu_analysis_resources("lyapunov"),
    shell:
        "python -m pipeline lyapunov --run-dir {params.run_dir:q} --tokenizer {input.tokenizer:q}"
        " --sentences {params.sentences:q} --output-token {params.output_token:q}"
        " --out {output.csv:q} --html {output.html:q} --gpus {resources.gpu:q} > {log:q} 2>&1"


rule frontier:
    input:
        unpack(run_inputs),
        summary=lambda wildcards: run_summary(wildcards.run),
    output:
        csv=f"{ANALYSIS_DIR}/frontier/{{run}}.csv",
    params:
        run_dir=lambda wildcards: f"{RESULTS}/runs/{wildcards.run}",
        step_factors=json.dumps(ANALYSIS_CONFIG["frontier"]["step_factors"]),
        solvers=json.dumps(ANALYSIS_CONFIG["frontier"]["solvers"]),
        version=FRONTIER_VERSION,  # a new frontier version reruns CSVs computed by an older one
    log:
        f"{RESULTS}/logs/analysis/frontier/{{run}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/analysis/frontier/{{run}}.tsv"
    resources:
        **gpu_analysis_resources("frontier"),
    shell:
        "python -m pipeline frontier --run-dir {params.run_dir:q} --cache {input.cache:q}"
        " --tokenizer {input.tokenizer:q} --step-factors {params.step_factors:q} --solvers {params.solvers:q}"
        " --out {output.csv:q} --gpus {resources.gpu:q} > {log:q} 2>&1"


rule clustering:
    output:
        trajectories=f"{ANALYSIS_DIR}/clustering/trajectories.csv",
        stats=f"{ANALYSIS_DIR}/clustering/stats.csv",
        sweep=f"{ANALYSIS_DIR}/clustering/sweep.csv",
    params:
        settings=json.dumps(ANALYSIS_CONFIG["clustering"], sort_keys=True),
        out_dir=lambda wildcards, output: os.path.dirname(output.stats),
    log:
        f"{RESULTS}/logs/analysis/clustering.log",
    benchmark:
        f"{RESULTS}/benchmarks/analysis/clustering.tsv"
    resources:
        gpu=0,
        mem_mb=2000,
        runtime=10,
    shell:
        "python -m pipeline clustering --settings {params.settings:q} --out-dir {params.out_dir:q} > {log:q} 2>&1"


rule param_counts:
    output:
        csv=f"{ANALYSIS_DIR}/param_counts.csv",
    log:
        f"{RESULTS}/logs/analysis/param_counts.log",
    benchmark:
        f"{RESULTS}/benchmarks/analysis/param_counts.tsv"
    resources:
        gpu=0,
        mem_mb=4000,
        runtime=10,
    shell:
        "python -m pipeline param-counts --out {output.csv:q} > {log:q} 2>&1"


rule memory_probe:
    input:
        unpack(sized_by("fit")),
        tokenizer=lambda wildcards: data_inputs(GRID.probes[wildcards.probe])["tokenizer"],
    output:
        record=f"{ANALYSIS_DIR}/memory/{{probe}}.json",
    params:
        spec=lambda wildcards: GRID.probes[wildcards.probe].spec.to_json(),
        steps=ANALYSIS_CONFIG["memory"]["steps"],
    log:
        f"{RESULTS}/logs/analysis/memory/{{probe}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/analysis/memory/{{probe}}.tsv"
    resources:
        **memory_probe_resources(),
    shell:
        "python -m pipeline memory-probe --spec {params.spec:q} --tokenizer {input.tokenizer:q}"
        " --steps {params.steps:q} --out {output.record:q} --gpus {resources.gpu:q} > {log:q} 2>&1"


# About a second of numpy each: on a cluster they run on the submit host.
localrules:
    clustering,
    param_counts,
