"""The paper's figures, each job from the tidy files it reads (never from checkpoints), so that rerunning after one
run changed redraws only the figures that show that run.

Seconds of CPU each: they run on the submit host (``localrule``). Captions: workflow/report/*.rst.
"""


rule figure_curves:
    input:
        lambda wildcards: [run_summary(run_id) for run_id, spec in TABLE_RUNS.items() if spec.group == wildcards.group],
    output:
        png=report_figure(f"{FIGURES}/curves/{{group}}.png", "curves", "Pretraining", "Figs. 4, 8: curves {group}"),
        pdf=f"{FIGURES}/curves/{{group}}.pdf",
    wildcard_constraints:
        group=one_of(TABLE_GROUPS),
    log:
        f"{RESULTS}/logs/report/figure_curves_{{group}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/figure_curves_{{group}}.tsv"
    resources:
        **TIDY_FILE_RESOURCES,
    localrule: True
    shell:
        "python -m pipeline figure curves --png {output.png:q} --pdf {output.pdf:q} --inputs {input:q} > {log:q} 2>&1"


rule figure_beta2:
    input:
        BETA2_SUMMARIES,
    output:
        png=report_figure(f"{FIGURES}/beta2.png", "beta2", "Ablations", "Fig. 7: Adam beta2"),
        pdf=f"{FIGURES}/beta2.pdf",
    log:
        f"{RESULTS}/logs/report/figure_beta2.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/figure_beta2.tsv"
    resources:
        **TIDY_FILE_RESOURCES,
    localrule: True
    shell:
        "python -m pipeline figure beta2 --png {output.png:q} --pdf {output.pdf:q} --inputs {input:q} > {log:q} 2>&1"


rule figure_time_embed_dim:
    input:
        TIME_EMBED_DIM_SUMMARIES,
    output:
        ppl=report_figure(
            f"{FIGURES}/time_embed_dim_ppl.png", "time_embed_dim_ppl", "Ablations", "Fig. 14: perplexity vs D"
        ),
        ppl_pdf=f"{FIGURES}/time_embed_dim_ppl.pdf",
        throughput=report_figure(
            f"{FIGURES}/time_embed_dim_throughput.png",
            "time_embed_dim_throughput",
            "Ablations",
            "Fig. 15: throughput vs D",
        ),
        throughput_pdf=f"{FIGURES}/time_embed_dim_throughput.pdf",
    log:
        f"{RESULTS}/logs/report/figure_time_embed_dim.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/figure_time_embed_dim.tsv"
    resources:
        **TIDY_FILE_RESOURCES,
    localrule: True
    shell:
        "python -m pipeline figure time-embed-dim --png {output.ppl:q} {output.throughput:q}"
        " --pdf {output.ppl_pdf:q} {output.throughput_pdf:q} --inputs {input:q} > {log:q} 2>&1"


rule figure_memory:
    input:
        MEMORY_RECORDS,
    output:
        png=report_figure(f"{FIGURES}/memory.png", "memory", "Ablations", "Fig. 16: peak memory vs D"),
        pdf=f"{FIGURES}/memory.pdf",
    log:
        f"{RESULTS}/logs/report/figure_memory.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/figure_memory.tsv"
    resources:
        **TIDY_FILE_RESOURCES,
    localrule: True
    shell:
        "python -m pipeline figure memory --png {output.png:q} --pdf {output.pdf:q} --inputs {input:q} > {log:q} 2>&1"


rule figure_time_mlp_design:
    input:
        TIME_MLP_DESIGN_SUMMARIES,
    output:
        png=report_figure(
            f"{FIGURES}/time_mlp_design.png", "time_mlp_design", "Ablations", "Fig. 18: time-weight design"
        ),
        pdf=f"{FIGURES}/time_mlp_design.pdf",
    log:
        f"{RESULTS}/logs/report/figure_time_mlp_design.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/figure_time_mlp_design.tsv"
    resources:
        **TIDY_FILE_RESOURCES,
    localrule: True
    shell:
        "python -m pipeline figure time-mlp-design --png {output.png:q} --pdf {output.pdf:q} --inputs {input:q}"
        " > {log:q} 2>&1"


rule figure_finetune:
    input:
        FINETUNE_TARGETS,
    output:
        png=report_figure(f"{FIGURES}/finetune.png", "finetune", "Fine-tuning", "Fig. 5: step-resampling fine-tunes"),
        pdf=f"{FIGURES}/finetune.pdf",
    log:
        f"{RESULTS}/logs/report/figure_finetune.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/figure_finetune.tsv"
    resources:
        **TIDY_FILE_RESOURCES,
    localrule: True
    shell:
        "python -m pipeline figure finetune --png {output.png:q} --pdf {output.pdf:q} --inputs {input:q} > {log:q} 2>&1"


rule figure_downstream:
    input:
        lambda wildcards: pair_downstream_csvs(wildcards.pair),
    output:
        png=[
            report_figure(
                f"{FIGURES}/downstream/{{pair}}-{k}shot.png",
                "downstream_figure",
                "Downstream",
                f"Figs. 9-12: {{pair}} {k}-shot",
            )
            for k in SHOTS
        ],
        pdf=[f"{FIGURES}/downstream/{{pair}}-{k}shot.pdf" for k in SHOTS],
    params:
        shots=",".join(str(k) for k in SHOTS),
    wildcard_constraints:
        pair=one_of(DOWNSTREAM_PAIRS),
    log:
        f"{RESULTS}/logs/report/figure_downstream_{{pair}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/figure_downstream_{{pair}}.tsv"
    resources:
        **TIDY_FILE_RESOURCES,
    localrule: True
    shell:
        "python -m pipeline figure downstream --shots {params.shots:q} --png {output.png:q} --pdf {output.pdf:q}"
        " --inputs {input:q} > {log:q} 2>&1"


rule figure_spectra:
    input:
        lambda wildcards: analysis_csv("spectra", wildcards.run),
    output:
        png=report_figure(f"{FIGURES}/spectra/{{run}}.png", "spectra", "Analyses", "Fig. 2a/b, App. E: spectra {run}"),
        pdf=f"{FIGURES}/spectra/{{run}}.pdf",
    log:
        f"{RESULTS}/logs/report/figure_spectra_{{run}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/figure_spectra_{{run}}.tsv"
    resources:
        **TIDY_FILE_RESOURCES,
    localrule: True
    shell:
        "python -m pipeline figure spectra --png {output.png:q} --pdf {output.pdf:q} --inputs {input:q} > {log:q} 2>&1"


rule figure_lyapunov:
    input:
        lambda wildcards: analysis_csv("lyapunov", wildcards.run),
    output:
        png=report_figure(f"{FIGURES}/lyapunov/{{run}}.png", "lyapunov", "Analyses", "Fig. 3, App. F: Lyapunov {run}"),
        pdf=f"{FIGURES}/lyapunov/{{run}}.pdf",
    params:
        output_token=config["analysis"]["lyapunov"]["output_token"],
    log:
        f"{RESULTS}/logs/report/figure_lyapunov_{{run}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/figure_lyapunov_{{run}}.tsv"
    resources:
        **TIDY_FILE_RESOURCES,
    localrule: True
    shell:
        "python -m pipeline figure lyapunov --output-token {params.output_token:q} --png {output.png:q}"
        " --pdf {output.pdf:q} --inputs {input:q} > {log:q} 2>&1"


rule figure_clustering:
    input:
        trajectories=f"{CLUSTERING_DIR}/trajectories.csv",
        stats=f"{CLUSTERING_DIR}/stats.csv",
    output:
        trajectories=report_figure(
            f"{FIGURES}/clustering_trajectories.png",
            "clustering_trajectories",
            "Analyses",
            "Figs. 2c/d, 13: clustering trajectories",
        ),
        trajectories_pdf=f"{FIGURES}/clustering_trajectories.pdf",
        stats=report_figure(
            f"{FIGURES}/clustering_stats.png", "clustering_stats", "Analyses", "Fig. 13: cluster statistics"
        ),
        stats_pdf=f"{FIGURES}/clustering_stats.pdf",
    log:
        f"{RESULTS}/logs/report/figure_clustering.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/figure_clustering.tsv"
    resources:
        **TIDY_FILE_RESOURCES,
    localrule: True
    shell:
        "python -m pipeline figure clustering --png {output.trajectories:q} {output.stats:q}"
        " --pdf {output.trajectories_pdf:q} {output.stats_pdf:q}"
        " --inputs {input.trajectories:q} {input.stats:q} > {log:q} 2>&1"


rule figure_frontier:
    input:
        FRONTIER_CSVS,
    output:
        png=report_figure(f"{FIGURES}/frontier.png", "frontier", "Analyses", "Compute/quality frontier"),
        pdf=f"{FIGURES}/frontier.pdf",
    log:
        f"{RESULTS}/logs/report/figure_frontier.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/figure_frontier.tsv"
    resources:
        **TIDY_FILE_RESOURCES,
    localrule: True
    shell:
        "python -m pipeline figure frontier --png {output.png:q} --pdf {output.pdf:q} --inputs {input:q} > {log:q} 2>&1"
