"""The scorecard: our numbers and evidence beside the paper's, from the stages' tidy files only.

Seconds of CPU: it runs on the submit host (``localrule``). Caption: workflow/report/scorecard.rst.
"""


rule scorecard:
    input:
        runs=f"{TABLES}/pretrain_runs.csv",
        finetune=FINETUNE_TARGETS,
        downstream=[path for pair in DOWNSTREAM_PAIRS for path in pair_downstream_csvs(pair)],
        spectra=SPECTRA_CSVS,
        untrained_spectra=UNTRAINED_SPECTRA_CSVS,
        clustering_sweep=f"{CLUSTERING_DIR}/sweep.csv",
        memory=MEMORY_RECORDS,
    output:
        md=f"{RESULTS}/scorecard.md",
        csv=f"{RESULTS}/scorecard.csv",
        html=report(
            f"{RESULTS}/scorecard.html",
            caption="../report/scorecard.rst",
            category="Scorecard",
            labels={"table": "Scorecard"},
        ),
    params:
        preset=PRESET,
    log:
        f"{RESULTS}/logs/report/scorecard.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/scorecard.tsv"
    resources:
        **TIDY_FILE_RESOURCES,
    localrule: True
    shell:
        "python -m pipeline scorecard --md {output.md:q} --csv {output.csv:q} --html {output.html:q}"
        " --preset {params.preset:q} --runs-csv {input.runs:q} --finetune {input.finetune:q}"
        " --downstream {input.downstream:q} --spectra {input.spectra:q} --untrained-spectra {input.untrained_spectra:q}"
        " --clustering-sweep {input.clustering_sweep:q} --memory {input.memory:q} > {log:q} 2>&1"
