"""The scorecard: our numbers and evidence beside the paper's, from the stages' tidy files only; and the grid's
status (``python -m pipeline status``) once its training runs are done.

Seconds of CPU: both run on the submit host (``localrule``). Captions: workflow/report/scorecard.rst, status.rst.
"""

import os


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
        **PRESET_AS_GIVEN,
    log:
        f"{RESULTS}/logs/report/scorecard.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/scorecard.tsv"
    resources:
        **TIDY_FILE_RESOURCES,
    localrule: True
    shell:
        "python -m pipeline scorecard --md {output.md:q} --csv {output.csv:q} --html {output.html:q}"
        " --preset {params.preset:q} --overrides {params.overrides:q} --runs-csv {input.runs:q}"
        " --finetune {input.finetune:q}"
        " --downstream {input.downstream:q} --spectra {input.spectra:q} --untrained-spectra {input.untrained_spectra:q}"
        " --clustering-sweep {input.clustering_sweep:q} --memory {input.memory:q} > {log:q} 2>&1"


rule status:
    input:
        runs=PRETRAIN_TARGETS,
        finetunes=FINETUNE_TARGETS,
    output:
        report(
            f"{RESULTS}/status.txt",
            caption="../report/status.rst",
            category="Status",
            labels={"table": "Status"},
        ),
    params:
        **PRESET_AS_GIVEN,
        results=lambda wildcards, output: os.path.dirname(output[0]),
        site=["--site", SITE_FILE] if SITE_FILE is not None else [],
    log:
        f"{RESULTS}/logs/report/status.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/status.tsv"
    resources:
        **TIDY_FILE_RESOURCES,
    localrule: True
    shell:
        "python -m pipeline status --preset {params.preset:q} --overrides {params.overrides:q}"
        " --results {params.results:q} {params.site:q} > {output:q} 2> {log:q}"
