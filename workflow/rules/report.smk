"""Report: tables generated from the runs' tidy summaries only (never from checkpoints)."""


rule perplexity_table:
    input:
        [run_summary(run_id) for run_id in RUNS],
    output:
        markdown=report(f"{RESULTS}/tables/perplexity.md", caption="../report/perplexity.rst", category="Tables"),
        csv=f"{RESULTS}/tables/perplexity.csv",
        runs=f"{RESULTS}/tables/pretrain_runs.csv",
    log:
        f"{RESULTS}/logs/report/perplexity_table.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/perplexity_table.tsv"
    resources:
        gpu=0,
        mem_mb=2000,
        runtime=10,
    conda:
        ENV
    shell:
        "python -m pipeline perplexity-table --markdown {output.markdown:q} --csv {output.csv:q}"
        " --runs-csv {output.runs:q} {input:q} > {log:q} 2>&1"
