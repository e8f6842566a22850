"""Report: tables, figures and the scorecard from the stages' tidy files only (never from checkpoints).

Each table/figure is one job whose inputs are exactly the files it reads, so rerunning after one run changed
recomputes only the tables and figures that show that run. Captions: workflow/report/*.rst.
"""

import json

from pipeline.report.fidelity import PRESET_SECTIONS
from pipeline.report.targets import ablation_run_ids

TABLES = f"{RESULTS}/tables"
FIGURES = f"{RESULTS}/figures"
TABLE_RUNS = {run_id: spec for run_id, spec in RUNS.items() if spec.role == "table"}
TABLE_GROUPS = sorted({spec.group for spec in TABLE_RUNS.values()})
DOWNSTREAM_PAIRS = sorted(config["downstream"]["pairs"])
SHOTS = config["downstream"]["shots"]
ANALYSIS = config["analysis"]


BETA2_SUMMARIES = [run_summary(run_id) for run_id in ablation_run_ids(RUNS, "beta2_")]
TIME_EMBED_DIM_SUMMARIES = [run_summary(run_id) for run_id in ablation_run_ids(RUNS, "time_embed_dim_", with_gpt=True)]
TIME_MLP_DESIGN_SUMMARIES = [run_summary(run_id) for run_id in ablation_run_ids(RUNS, "time_mlp_design_")]
figure = lambda path: [f"{path}.png", f"{path}.pdf"]
table = lambda path: [f"{path}.{suffix}" for suffix in ("md", "csv", "tex", "html")]
downstream_csv = lambda run_id: f"{RESULTS}/downstream/{run_id}/downstream.csv"
analysis_csv = lambda kind, run_id: f"{RESULTS}/analysis/{kind}/{run_id}.csv"
FINETUNE_SUMMARIES = [run_summary(run_id) for run_id in FINETUNE_RUNS]
DOWNSTREAM_CSVS = [downstream_csv(run_id) for pair in DOWNSTREAM_PAIRS for run_id in config["downstream"]["pairs"][pair]]
SPECTRA_CSVS = [analysis_csv("spectra", run_id) for run_id in ANALYSIS["spectra"]["runs"]]
CLUSTERING = f"{RESULTS}/analysis/clustering"

REPORT_TARGETS = [
    *table(f"{TABLES}/perplexity"),
    f"{TABLES}/pretrain_runs.csv",
    *table(f"{TABLES}/model_specs"),
    *table(f"{TABLES}/param_counts"),
    *[path for pair in DOWNSTREAM_PAIRS for path in table(f"{TABLES}/downstream_{pair}")],
    *[path for group in TABLE_GROUPS for path in figure(f"{FIGURES}/curves/{group}")],
    *[path for pair in DOWNSTREAM_PAIRS for k in SHOTS for path in figure(f"{FIGURES}/downstream/{pair}-{k}shot")],
    *[path for run_id in ANALYSIS["spectra"]["runs"] for path in figure(f"{FIGURES}/spectra/{run_id}")],
    *[path for run_id in ANALYSIS["lyapunov"]["runs"] for path in figure(f"{FIGURES}/lyapunov/{run_id}")],
    *figure(f"{FIGURES}/clustering_trajectories"),
    *figure(f"{FIGURES}/clustering_stats"),
    *figure(f"{FIGURES}/frontier"),
    *(figure(f"{FIGURES}/finetune") if FINETUNE_SUMMARIES else []),
    *(figure(f"{FIGURES}/beta2") if BETA2_SUMMARIES else []),
    *(figure(f"{FIGURES}/time_embed_dim_ppl") + figure(f"{FIGURES}/time_embed_dim_throughput")
      if TIME_EMBED_DIM_SUMMARIES else []),
    *(figure(f"{FIGURES}/time_mlp_design") if TIME_MLP_DESIGN_SUMMARIES else []),
    *figure(f"{FIGURES}/memory"),
    f"{RESULTS}/scorecard.md",
    f"{RESULTS}/scorecard.csv",
    f"{RESULTS}/scorecard.html",
    *[f"{TABLES}/fidelity.{suffix}" for suffix in ("md", "csv", "html")],
]


rule perplexity_table:
    input:
        [run_summary(run_id) for run_id in RUNS],
    output:
        markdown=f"{TABLES}/perplexity.md",
        csv=f"{TABLES}/perplexity.csv",
        tex=f"{TABLES}/perplexity.tex",
        html=report(f"{TABLES}/perplexity.html", caption="../report/perplexity.rst", category="Tables",
                    subcategory="Pretraining", labels={"table": "Tables 1-2: perplexity"}),
        runs=f"{TABLES}/pretrain_runs.csv",
    params:
        out=lambda wildcards, output: output.html.removesuffix(".html"),
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
        "python -m pipeline perplexity-table --out {params.out:q} --runs-csv {output.runs:q} {input:q} > {log:q} 2>&1"


rule fidelity_table:
    output:
        markdown=f"{TABLES}/fidelity.md",
        csv=f"{TABLES}/fidelity.csv",
        html=report(f"{TABLES}/fidelity.html", caption="../report/fidelity.rst", category="Tables",
                    subcategory="Fidelity", labels={"table": "Fidelity ledger"}),
    params:
        out=lambda wildcards, output: output.html.removesuffix(".html"),
        config_json=json.dumps({section: config[section] for section in PRESET_SECTIONS}, sort_keys=True),
    log:
        f"{RESULTS}/logs/report/fidelity_table.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/fidelity_table.tsv"
    resources:
        gpu=0,
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    shell:
        "python -m pipeline fidelity-table --out {params.out:q} --config-json {params.config_json:q} > {log:q} 2>&1"


rule model_spec_table:
    input:
        [run_summary(run_id) for run_id in TABLE_RUNS],
    output:
        markdown=f"{TABLES}/model_specs.md",
        csv=f"{TABLES}/model_specs.csv",
        tex=f"{TABLES}/model_specs.tex",
        html=report(f"{TABLES}/model_specs.html", caption="../report/model_specs.rst", category="Tables",
                    subcategory="Pretraining", labels={"table": "Table 3: model specifications"}),
    params:
        out=lambda wildcards, output: output.html.removesuffix(".html"),
    log:
        f"{RESULTS}/logs/report/model_spec_table.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/model_spec_table.tsv"
    resources:
        gpu=0,
        mem_mb=2000,
        runtime=10,
    conda:
        ENV
    shell:
        "python -m pipeline spec-table --out {params.out:q} {input:q} > {log:q} 2>&1"


rule downstream_table:
    input:
        lambda wildcards: [downstream_csv(run_id) for run_id in config["downstream"]["pairs"][wildcards.pair]],
    output:
        markdown=f"{TABLES}/downstream_{{pair}}.md",
        csv=f"{TABLES}/downstream_{{pair}}.csv",
        tex=f"{TABLES}/downstream_{{pair}}.tex",
        html=report(f"{TABLES}/downstream_{{pair}}.html", caption="../report/downstream_table.rst",
                    category="Tables", subcategory="Downstream", labels={"table": "Tables 4-5: {pair}"}),
    params:
        out=f"{TABLES}/downstream_{{pair}}",
    wildcard_constraints:
        pair=one_of(DOWNSTREAM_PAIRS),
    log:
        f"{RESULTS}/logs/report/downstream_table_{{pair}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/downstream_table_{{pair}}.tsv"
    resources:
        gpu=0,
        mem_mb=2000,
        runtime=10,
    conda:
        ENV
    shell:
        "python -m pipeline downstream-table --out {params.out:q} {input:q} > {log:q} 2>&1"


rule param_count_table:
    input:
        f"{RESULTS}/analysis/param_counts.csv",
    output:
        markdown=f"{TABLES}/param_counts.md",
        csv=f"{TABLES}/param_counts.csv",
        tex=f"{TABLES}/param_counts.tex",
        html=report(f"{TABLES}/param_counts.html", caption="../report/param_counts.rst", category="Tables",
                    subcategory="Ablations", labels={"table": "Table 6: parameters vs D"}),
    params:
        out=lambda wildcards, output: output.html.removesuffix(".html"),
    log:
        f"{RESULTS}/logs/report/param_count_table.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/param_count_table.tsv"
    resources:
        gpu=0,
        mem_mb=2000,
        runtime=10,
    conda:
        ENV
    shell:
        "python -m pipeline param-count-table --out {params.out:q} {input:q} > {log:q} 2>&1"


rule figure_curves:
    input:
        lambda wildcards: [run_summary(run_id) for run_id, spec in TABLE_RUNS.items() if spec.group == wildcards.group],
    output:
        png=report(f"{FIGURES}/curves/{{group}}.png", caption="../report/curves.rst", category="Figures",
                   subcategory="Pretraining", labels={"figure": "Figs. 4, 8: curves {group}"}),
        pdf=f"{FIGURES}/curves/{{group}}.pdf",
    params:
        out=f"{FIGURES}/curves/{{group}}",
    wildcard_constraints:
        group=one_of(TABLE_GROUPS),
    log:
        f"{RESULTS}/logs/report/figure_curves_{{group}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/figure_curves_{{group}}.tsv"
    resources:
        gpu=0,
        mem_mb=2000,
        runtime=10,
    conda:
        ENV
    shell:
        "python -m pipeline figure curves --out {params.out:q} {input:q} > {log:q} 2>&1"


rule figure_beta2:
    input:
        BETA2_SUMMARIES,
    output:
        png=report(f"{FIGURES}/beta2.png", caption="../report/beta2.rst", category="Figures",
                   subcategory="Ablations", labels={"figure": "Fig. 7: Adam beta2"}),
        pdf=f"{FIGURES}/beta2.pdf",
    params:
        out=lambda wildcards, output: output.png.removesuffix(".png"),
    log:
        f"{RESULTS}/logs/report/figure_beta2.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/figure_beta2.tsv"
    resources:
        gpu=0,
        mem_mb=2000,
        runtime=10,
    conda:
        ENV
    shell:
        "python -m pipeline figure beta2 --out {params.out:q} {input:q} > {log:q} 2>&1"


rule figure_time_embed_dim:
    input:
        TIME_EMBED_DIM_SUMMARIES,
    output:
        ppl=report(f"{FIGURES}/time_embed_dim_ppl.png", caption="../report/time_embed_dim_ppl.rst",
                   category="Figures", subcategory="Ablations", labels={"figure": "Fig. 14: perplexity vs D"}),
        ppl_pdf=f"{FIGURES}/time_embed_dim_ppl.pdf",
        throughput=report(f"{FIGURES}/time_embed_dim_throughput.png",
                          caption="../report/time_embed_dim_throughput.rst", category="Figures",
                          subcategory="Ablations", labels={"figure": "Fig. 15: throughput vs D"}),
        throughput_pdf=f"{FIGURES}/time_embed_dim_throughput.pdf",
    params:
        out=lambda wildcards, output: output.ppl.removesuffix("_ppl.png"),
    log:
        f"{RESULTS}/logs/report/figure_time_embed_dim.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/figure_time_embed_dim.tsv"
    resources:
        gpu=0,
        mem_mb=2000,
        runtime=10,
    conda:
        ENV
    shell:
        "python -m pipeline figure time-embed-dim --out {params.out:q} {input:q} > {log:q} 2>&1"


rule figure_memory:
    input:
        MEMORY_RECORDS,
    output:
        png=report(f"{FIGURES}/memory.png", caption="../report/memory.rst", category="Figures",
                   subcategory="Ablations", labels={"figure": "Fig. 16: peak memory vs D"}),
        pdf=f"{FIGURES}/memory.pdf",
    params:
        out=lambda wildcards, output: output.png.removesuffix(".png"),
    log:
        f"{RESULTS}/logs/report/figure_memory.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/figure_memory.tsv"
    resources:
        gpu=0,
        mem_mb=2000,
        runtime=10,
    conda:
        ENV
    shell:
        "python -m pipeline figure memory --out {params.out:q} {input:q} > {log:q} 2>&1"


rule figure_time_mlp_design:
    input:
        TIME_MLP_DESIGN_SUMMARIES,
    output:
        png=report(f"{FIGURES}/time_mlp_design.png", caption="../report/time_mlp_design.rst", category="Figures",
                   subcategory="Ablations", labels={"figure": "Fig. 18: time-weight design"}),
        pdf=f"{FIGURES}/time_mlp_design.pdf",
    params:
        out=lambda wildcards, output: output.png.removesuffix(".png"),
    log:
        f"{RESULTS}/logs/report/figure_time_mlp_design.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/figure_time_mlp_design.tsv"
    resources:
        gpu=0,
        mem_mb=2000,
        runtime=10,
    conda:
        ENV
    shell:
        "python -m pipeline figure time-mlp-design --out {params.out:q} {input:q} > {log:q} 2>&1"


rule figure_finetune:
    input:
        FINETUNE_SUMMARIES,
    output:
        png=report(f"{FIGURES}/finetune.png", caption="../report/finetune.rst", category="Figures",
                   subcategory="Fine-tuning", labels={"figure": "Fig. 5: step-resampling fine-tunes"}),
        pdf=f"{FIGURES}/finetune.pdf",
    params:
        out=lambda wildcards, output: output.png.removesuffix(".png"),
    log:
        f"{RESULTS}/logs/report/figure_finetune.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/figure_finetune.tsv"
    resources:
        gpu=0,
        mem_mb=2000,
        runtime=10,
    conda:
        ENV
    shell:
        "python -m pipeline figure finetune --out {params.out:q} {input:q} > {log:q} 2>&1"


rule figure_downstream:
    input:
        lambda wildcards: [downstream_csv(run_id) for run_id in config["downstream"]["pairs"][wildcards.pair]],
    output:
        png=[report(f"{FIGURES}/downstream/{{pair}}-{k}shot.png", caption="../report/downstream_figure.rst",
                    category="Figures", subcategory="Downstream", labels={"figure": f"Figs. 9-12: {{pair}} {k}-shot"})
             for k in SHOTS],
        pdf=[f"{FIGURES}/downstream/{{pair}}-{k}shot.pdf" for k in SHOTS],
    params:
        out=f"{FIGURES}/downstream/{{pair}}",
        shots=",".join(str(k) for k in SHOTS),
    wildcard_constraints:
        pair=one_of(DOWNSTREAM_PAIRS),
    log:
        f"{RESULTS}/logs/report/figure_downstream_{{pair}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/figure_downstream_{{pair}}.tsv"
    resources:
        gpu=0,
        mem_mb=2000,
        runtime=10,
    conda:
        ENV
    shell:
        "python -m pipeline figure downstream --out {params.out:q} --shots {params.shots:q} {input:q} > {log:q} 2>&1"


rule figure_spectra:
    input:
        lambda wildcards: analysis_csv("spectra", wildcards.run),
    output:
        png=report(f"{FIGURES}/spectra/{{run}}.png", caption="../report/spectra.rst", category="Figures",
                   subcategory="Analyses", labels={"figure": "Fig. 2a/b, App. E: spectra {run}"}),
        pdf=f"{FIGURES}/spectra/{{run}}.pdf",
    params:
        out=f"{FIGURES}/spectra/{{run}}",
    log:
        f"{RESULTS}/logs/report/figure_spectra_{{run}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/figure_spectra_{{run}}.tsv"
    resources:
        gpu=0,
        mem_mb=2000,
        runtime=10,
    conda:
        ENV
    shell:
        "python -m pipeline figure spectra --out {params.out:q} {input:q} > {log:q} 2>&1"


rule figure_lyapunov:
    input:
        lambda wildcards: analysis_csv("lyapunov", wildcards.run),
    output:
        png=report(f"{FIGURES}/lyapunov/{{run}}.png", caption="../report/lyapunov.rst", category="Figures",
                   subcategory="Analyses", labels={"figure": "Fig. 3, App. F: Lyapunov {run}"}),
        pdf=f"{FIGURES}/lyapunov/{{run}}.pdf",
    params:
        out=f"{FIGURES}/lyapunov/{{run}}",
        output_token=ANALYSIS["lyapunov"]["output_token"],
    log:
        f"{RESULTS}/logs/report/figure_lyapunov_{{run}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/figure_lyapunov_{{run}}.tsv"
    resources:
        gpu=0,
        mem_mb=2000,
        runtime=10,
    conda:
        ENV
    shell:
        "python -m pipeline figure lyapunov --out {params.out:q} --output-token {params.output_token:q}"
        " {input:q} > {log:q} 2>&1"


rule figure_clustering:
    input:
        trajectories=f"{CLUSTERING}/trajectories.csv",
        stats=f"{CLUSTERING}/stats.csv",
    output:
        trajectories=report(f"{FIGURES}/clustering_trajectories.png", caption="../report/clustering_trajectories.rst",
                            category="Figures", subcategory="Analyses",
                            labels={"figure": "Figs. 2c/d, 13: clustering trajectories"}),
        trajectories_pdf=f"{FIGURES}/clustering_trajectories.pdf",
        stats=report(f"{FIGURES}/clustering_stats.png", caption="../report/clustering_stats.rst", category="Figures",
                     subcategory="Analyses", labels={"figure": "Fig. 13: cluster statistics"}),
        stats_pdf=f"{FIGURES}/clustering_stats.pdf",
    params:
        out=lambda wildcards, output: output.trajectories.removesuffix("_trajectories.png"),
    log:
        f"{RESULTS}/logs/report/figure_clustering.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/figure_clustering.tsv"
    resources:
        gpu=0,
        mem_mb=2000,
        runtime=10,
    conda:
        ENV
    shell:
        "python -m pipeline figure clustering --out {params.out:q} {input.trajectories:q} {input.stats:q}"
        " > {log:q} 2>&1"


rule figure_frontier:
    input:
        [analysis_csv("frontier", run_id) for run_id in ANALYSIS["frontier"]["runs"]],
    output:
        png=report(f"{FIGURES}/frontier.png", caption="../report/frontier.rst", category="Figures",
                   subcategory="Analyses", labels={"figure": "Compute/quality frontier"}),
        pdf=f"{FIGURES}/frontier.pdf",
    params:
        out=lambda wildcards, output: output.png.removesuffix(".png"),
    log:
        f"{RESULTS}/logs/report/figure_frontier.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/figure_frontier.tsv"
    resources:
        gpu=0,
        mem_mb=2000,
        runtime=10,
    conda:
        ENV
    shell:
        "python -m pipeline figure frontier --out {params.out:q} {input:q} > {log:q} 2>&1"


rule scorecard:
    input:
        runs=f"{TABLES}/pretrain_runs.csv",
        finetune=FINETUNE_SUMMARIES,
        downstream=DOWNSTREAM_CSVS,
        spectra=SPECTRA_CSVS,
        clustering=f"{CLUSTERING}/stats.csv",
        clustering_sweep=f"{CLUSTERING}/sweep.csv",
        memory=MEMORY_RECORDS,
    output:
        markdown=f"{RESULTS}/scorecard.md",
        csv=f"{RESULTS}/scorecard.csv",
        html=report(f"{RESULTS}/scorecard.html", caption="../report/scorecard.rst", category="Scorecard",
                    labels={"table": "Scorecard"}),
    params:
        out=lambda wildcards, output: output.html.removesuffix(".html"),
        preset=PRESET,
    log:
        f"{RESULTS}/logs/report/scorecard.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/scorecard.tsv"
    resources:
        gpu=0,
        mem_mb=2000,
        runtime=10,
    conda:
        ENV
    shell:
        "python -m pipeline scorecard --out {params.out:q} --preset {params.preset:q} --runs-csv {input.runs:q}"
        " --finetune {input.finetune:q} --downstream {input.downstream:q} --spectra {input.spectra:q}"
        " --clustering-stats {input.clustering:q} --clustering-sweep {input.clustering_sweep:q}"
        " --memory {input.memory:q} > {log:q} 2>&1"


# Seconds of CPU each, from tidy files: on a cluster they run on the submit host instead of waiting in a queue.
localrules:
    perplexity_table,
    model_spec_table,
    downstream_table,
    param_count_table,
    figure_curves,
    figure_beta2,
    figure_time_embed_dim,
    figure_memory,
    figure_time_mlp_design,
    figure_finetune,
    figure_downstream,
    figure_spectra,
    figure_lyapunov,
    figure_clustering,
    figure_frontier,
    fidelity_table,
    scorecard,
