"""The paper's tables (1-6) and the fidelity ledger, each from the tidy files it reads (never from checkpoints).

Seconds of CPU each: they run on the submit host (``localrule``). Captions: workflow/report/*.rst.
"""

import json

from pipeline.report.fidelity import PRESET_SECTIONS


rule perplexity_table:
    input:
        [run_summary(run_id) for run_id in TABLE_RUNS],
    output:
        md=f"{TABLES}/perplexity.md",
        csv=f"{TABLES}/perplexity.csv",
        tex=f"{TABLES}/perplexity.tex",
        html=report_table(f"{TABLES}/perplexity.html", "perplexity", "Pretraining", "Tables 1-2: perplexity"),
    log:
        f"{RESULTS}/logs/report/perplexity_table.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/perplexity_table.tsv"
    resources:
        **TIDY_FILE_RESOURCES,
    localrule: True
    shell:
        "python -m pipeline perplexity-table --md {output.md:q} --csv {output.csv:q} --tex {output.tex:q}"
        " --html {output.html:q} {input:q} > {log:q} 2>&1"


rule pretrain_runs_csv:
    input:
        [run_summary(run_id) for run_id in RUNS],
    output:
        f"{TABLES}/pretrain_runs.csv",
    log:
        f"{RESULTS}/logs/report/pretrain_runs_csv.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/pretrain_runs_csv.tsv"
    resources:
        **TIDY_FILE_RESOURCES,
    localrule: True
    shell:
        "python -m pipeline runs-csv --out {output:q} {input:q} > {log:q} 2>&1"


rule fidelity_table:
    output:
        md=f"{TABLES}/fidelity.md",
        csv=f"{TABLES}/fidelity.csv",
        html=report_table(f"{TABLES}/fidelity.html", "fidelity", "Fidelity", "Fidelity ledger"),
    params:
        config_json=json.dumps({section: config[section] for section in PRESET_SECTIONS}, sort_keys=True),
    log:
        f"{RESULTS}/logs/report/fidelity_table.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/fidelity_table.tsv"
    resources:
        gpu=0,
        mem_mb=1000,
        runtime=5,
    localrule: True
    shell:
        "python -m pipeline fidelity-table --md {output.md:q} --csv {output.csv:q} --html {output.html:q}"
        " --config-json {params.config_json:q} > {log:q} 2>&1"


rule model_spec_table:
    input:
        [run_summary(run_id) for run_id in TABLE_RUNS],
    output:
        md=f"{TABLES}/model_specs.md",
        csv=f"{TABLES}/model_specs.csv",
        tex=f"{TABLES}/model_specs.tex",
        html=report_table(f"{TABLES}/model_specs.html", "model_specs", "Pretraining", "Table 3: model specifications"),
    log:
        f"{RESULTS}/logs/report/model_spec_table.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/model_spec_table.tsv"
    resources:
        **TIDY_FILE_RESOURCES,
    localrule: True
    shell:
        "python -m pipeline spec-table --md {output.md:q} --csv {output.csv:q} --tex {output.tex:q}"
        " --html {output.html:q} {input:q} > {log:q} 2>&1"


rule downstream_table:
    input:
        lambda wildcards: pair_downstream_csvs(wildcards.pair),
    output:
        md=f"{TABLES}/downstream_{{pair}}.md",
        csv=f"{TABLES}/downstream_{{pair}}.csv",
        tex=f"{TABLES}/downstream_{{pair}}.tex",
        html=report_table(f"{TABLES}/downstream_{{pair}}.html", "downstream_table", "Downstream", "Tables 4-5: {pair}"),
    wildcard_constraints:
        pair=one_of(DOWNSTREAM_PAIRS),
    log:
        f"{RESULTS}/logs/report/downstream_table_{{pair}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/downstream_table_{{pair}}.tsv"
    resources:
        **TIDY_FILE_RESOURCES,
    localrule: True
    shell:
        "python -m pipeline downstream-table --md {output.md:q} --csv {output.csv:q} --tex {output.tex:q}"
        " --html {output.html:q} {input:q} > {log:q} 2>&1"


rule param_count_table:
    input:
        f"{ANALYSIS_DIR}/param_counts.csv",
    output:
        md=f"{TABLES}/param_counts.md",
        csv=f"{TABLES}/param_counts.csv",
        tex=f"{TABLES}/param_counts.tex",
        html=report_table(f"{TABLES}/param_counts.html", "param_counts", "Ablations", "Table 6: parameters vs D"),
    log:
        f"{RESULTS}/logs/report/param_count_table.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/param_count_table.tsv"
    resources:
        **TIDY_FILE_RESOURCES,
    localrule: True
    shell:
        "python -m pipeline param-count-table --md {output.md:q} --csv {output.csv:q} --tex {output.tex:q}"
        " --html {output.html:q} {input:q} > {log:q} 2>&1"
