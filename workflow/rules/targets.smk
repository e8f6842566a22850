"""Where every stage writes: the layout of results/<preset>/ and the targets of `rule all`, in one place.

Included right after common.smk, so that a stage's rules read the files of another stage from here and never from
that stage's include (the include order of the stages does not matter).
"""

from pipeline.report.targets import ablation_run_ids

ANALYSIS_DIR = f"{RESULTS}/analysis"
CLUSTERING_DIR = f"{ANALYSIS_DIR}/clustering"
DOWNSTREAM_DIR = f"{RESULTS}/downstream"
TABLES = f"{RESULTS}/tables"
FIGURES = f"{RESULTS}/figures"
DOWNSTREAM_PAIRS = sorted(config["downstream"]["pairs"])
SHOTS = config["downstream"]["shots"]
TABLE_RUNS = {run_id: spec for run_id, spec in RUNS.items() if spec.role == "table"}
TABLE_GROUPS = sorted({spec.group for spec in TABLE_RUNS.values()})


def downstream_csv(run_id):
    return f"{DOWNSTREAM_DIR}/{run_id}/downstream.csv"


def analysis_csv(kind, run_id):
    return f"{ANALYSIS_DIR}/{kind}/{run_id}.csv"


def figure_files(stem):
    """A figure's PNG and PDF."""
    return [f"{stem}.png", f"{stem}.pdf"]


def table_files(stem, formats=("md", "csv", "tex", "html")):
    """A table's tidy CSV and its views."""
    return [f"{stem}.{suffix}" for suffix in formats]


def pair_downstream_csvs(pair):
    return [downstream_csv(run_id) for run_id in config["downstream"]["pairs"][pair]]


PRETRAIN_TARGETS = [run_summary(run_id) for run_id in RUNS]
FINETUNE_TARGETS = [run_summary(run_id) for run_id in GRID.finetunes]
EVALUATE_TARGETS = [downstream_csv(job.model_id) for job in GRID.downstream.values()]
MEMORY_RECORDS = [f"{ANALYSIS_DIR}/memory/{probe_id}.json" for probe_id in GRID.probes]
SPECTRA_CSVS = [analysis_csv("spectra", run_id) for run_id in GRID.analyses["spectra"]]
UNTRAINED_SPECTRA_CSVS = [analysis_csv("spectra_untrained", run_id) for run_id in GRID.analyses["spectra"]]
FRONTIER_CSVS = [analysis_csv("frontier", run_id) for run_id in GRID.analyses["frontier"]]
ANALYSIS_TARGETS = [
    *SPECTRA_CSVS,
    *[f"{ANALYSIS_DIR}/lyapunov/{run_id}.{ext}" for run_id in GRID.analyses["lyapunov"] for ext in ("csv", "html")],
    f"{CLUSTERING_DIR}/trajectories.csv",
    f"{CLUSTERING_DIR}/stats.csv",
    *FRONTIER_CSVS,
    f"{ANALYSIS_DIR}/param_counts.csv",
    *MEMORY_RECORDS,
]

BETA2_SUMMARIES = [run_summary(run_id) for run_id in ablation_run_ids(RUNS, "beta2_")]
TIME_EMBED_DIM_SUMMARIES = [run_summary(run_id) for run_id in ablation_run_ids(RUNS, "time_embed_dim_", with_gpt=True)]
TIME_MLP_DESIGN_SUMMARIES = [run_summary(run_id) for run_id in ablation_run_ids(RUNS, "time_mlp_design_")]
REPORT_TARGETS = [
    *table_files(f"{TABLES}/perplexity"),
    f"{TABLES}/pretrain_runs.csv",
    *table_files(f"{TABLES}/model_specs"),
    *table_files(f"{TABLES}/param_counts"),
    *[path for pair in DOWNSTREAM_PAIRS for path in table_files(f"{TABLES}/downstream_{pair}")],
    *table_files(f"{TABLES}/fidelity", formats=("md", "csv", "html")),
    *[path for group in TABLE_GROUPS for path in figure_files(f"{FIGURES}/curves/{group}")],
    *[
        path
        for pair in DOWNSTREAM_PAIRS
        for k in SHOTS
        for path in figure_files(f"{FIGURES}/downstream/{pair}-{k}shot")
    ],
    *[path for run_id in GRID.analyses["spectra"] for path in figure_files(f"{FIGURES}/spectra/{run_id}")],
    *[path for run_id in GRID.analyses["lyapunov"] for path in figure_files(f"{FIGURES}/lyapunov/{run_id}")],
    *figure_files(f"{FIGURES}/clustering_trajectories"),
    *figure_files(f"{FIGURES}/clustering_stats"),
    *figure_files(f"{FIGURES}/frontier"),
    *(figure_files(f"{FIGURES}/finetune") if FINETUNE_TARGETS else []),
    *(figure_files(f"{FIGURES}/beta2") if BETA2_SUMMARIES else []),
    *(
        figure_files(f"{FIGURES}/time_embed_dim_ppl") + figure_files(f"{FIGURES}/time_embed_dim_throughput")
        if TIME_EMBED_DIM_SUMMARIES
        else []
    ),
    *(figure_files(f"{FIGURES}/time_mlp_design") if TIME_MLP_DESIGN_SUMMARIES else []),
    *figure_files(f"{FIGURES}/memory"),
    *table_files(f"{RESULTS}/scorecard", formats=("md", "csv", "html")),
    f"{RESULTS}/status.txt",
]
