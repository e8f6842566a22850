"""Preset loading, the experiment grid as run ids, and target functions."""

import functools
import json
import re

from snakemake.exceptions import WorkflowError

from pipeline.commands import (
    export_code_path,
    export_ray_placement,
    export_trackers,
    export_xla_flags,
    start_shared_local_ray,
)
from pipeline.config import (
    ConfigError,
    check_inside_results,
    downstream_task_dir,
    finetune_runs,
    load_preset,
    memory_probes,
    pretrain_runs,
)
from pipeline.bench.fit import plans_digest
from pipeline.data.prefetch import hub_items
from pipeline.site import JobResources, export_site_environment, load_site
from pipeline.analysis.tidy import FRONTIER_VERSION
from pipeline.preflight.shapes import PREFLIGHT_RUNTIME_MIN, training_shapes
from pipeline.train.identity import TRAIN_STEP

SITE_FILE = config.pop("site", None)
try:
    _resolved = load_preset(config)
    SITE = load_site(SITE_FILE) if SITE_FILE is not None else None
except (ConfigError, FileNotFoundError, ValueError) as error:
    raise WorkflowError(str(error)) from None
config.clear()
config.update(_resolved)

PRESET = config["preset"]
RESULTS = f"results/{PRESET}"
DATA = f"{RESULTS}/data"
RUNS = pretrain_runs(config)
FINETUNE_RUNS = finetune_runs(config)
MEMORY_PROBES = memory_probes(config)
EVALUATE_TASK_DIR = downstream_task_dir(config)
HUB_ITEMS = hub_items(config)
PREFETCH_MANIFEST = f"{DATA}/prefetch.json"
# Jobs that read the hub read the shared cache the prefetch filled (nothing to fetch: no prefetch job).
PREFETCHED = [PREFETCH_MANIFEST] if any(HUB_ITEMS.values()) else []


def one_of(names):
    """A wildcard constraint matching exactly these names (ids may contain '.', a regex wildcard)."""
    return "|".join(re.escape(name) for name in names)


wildcard_constraints:
    dataset=one_of(config["datasets"]),
    tokenizer=one_of(config["tokenizers"]),
    run=one_of(RUNS),
    finetune=one_of(FINETUNE_RUNS),
    probe=one_of(MEMORY_PROBES),


def run_summary(run_id):
    return f"{RESULTS}/runs/{run_id}/summary.json"


def corpus_source(wildcards):
    return json.dumps(config["datasets"][wildcards.dataset]["source"], sort_keys=True)


def tokenizer_spec(wildcards):
    return json.dumps(config["tokenizers"][wildcards.tokenizer], sort_keys=True)


def prefetched_option(wildcards, input):
    return [arg for path in input.prefetched for arg in ("--prefetched", path)]


def tokenizer_corpora(wildcards):
    return [f"{DATA}/corpora/{dataset}" for dataset in config["tokenizers"][wildcards.tokenizer].get("train_on", [])]


def run_inputs(wildcards):
    return run_data(wildcards.run)


def run_data(run_id):
    """A pretraining run's token cache and tokenizer."""
    spec = RUNS[run_id]
    return {
        "cache": f"{DATA}/caches/{spec.dataset}-{spec.tokenizer}",
        "tokenizer": f"{DATA}/tokenizers/{spec.tokenizer}",
    }


def finetune_inputs(wildcards):
    """The source run (complete: its summary) and the target dataset's cache with the source's tokenizer."""
    spec = FINETUNE_RUNS[wildcards.finetune]
    return {
        "source": run_summary(spec.source_run),
        "cache": f"{DATA}/caches/{spec.target_dataset}-{spec.tokenizer}",
        "tokenizer": f"{DATA}/tokenizers/{spec.tokenizer}",
    }


def require_inside_results(*targets):
    """Every planned output stays inside results/<preset>/, checked before anything runs."""
    try:
        check_inside_results(RESULTS, [path for group in targets for path in group])
    except ConfigError as error:
        raise WorkflowError(str(error)) from None


def training_resources(stage, wildcard):
    """A training rule's resources: per run (its ``wildcard``) from its size, the site and the fit table
    (pipeline/site.py)."""
    return JOBS.rule_resources(
        lambda wildcards: JOBS.training(stage, getattr(wildcards, wildcard)), gpu=True, training=True
    )


def gpu_analysis_resources(rule):
    """One GPU at a site with GPUs (the run is the ``run`` wildcard)."""
    return JOBS.rule_resources(lambda wildcards: JOBS.gpu_analysis(rule, wildcards.run), gpu=True)


def cpu_resources(rule):
    return JOBS.rule_resources(lambda wildcards: JOBS.cpu(rule), gpu=False)


TIDY_FILE_RESOURCES = {"gpu": 0, "mem_mb": 2000, "runtime": 10}
"""A table, figure or scorecard job: seconds of CPU reading tidy files, run on the submit host (``localrule``)."""


def report_table(path, caption, subcategory, label):
    """``path`` shown by `snakemake --report` under Tables / ``subcategory``, captioned by workflow/report/<caption>.rst."""
    return report(
        path, caption=f"../report/{caption}.rst", category="Tables", subcategory=subcategory, labels={"table": label}
    )


def report_figure(path, caption, subcategory, label):
    """``path`` shown by `snakemake --report` under Figures / ``subcategory``, captioned by workflow/report/<caption>.rst."""
    return report(
        path, caption=f"../report/{caption}.rst", category="Figures", subcategory=subcategory, labels={"figure": label}
    )


JOBS = JobResources(config, SITE, fit_table=f"{RESULTS}/fit.csv", preflight_table=f"{RESULTS}/preflight.csv")
export_code_path(REPO_ROOT)
export_ray_placement(config["ray"])
export_xla_flags(config.get("xla_flags", ""))
export_trackers(config.get("tracker", ["jsonl"]))
export_site_environment(SITE)

# The preflight (rules/preflight.smk): its job shapes, sized like the grid's runs, each job's inputs and resources.
PREFLIGHT = f"{RESULTS}/preflight"
PREFLIGHT_DEVICE = SITE.device if SITE is not None else "cpu"


wildcard_constraints:
    shape="[a-z0-9_.]+-[a-z0-9_.]+-g[0-9]+-mb[0-9]+",


@functools.cache
def preflight_shapes():
    """The shapes, sized like the grid's runs (with a site: from the fit table, which must exist by now)."""
    try:
        return training_shapes(config, JOBS)
    except ValueError as error:
        raise WorkflowError(str(error)) from None


def preflight_shape(wildcards):
    return preflight_shapes()[wildcards.shape]


def preflight_job_inputs(wildcards):
    return run_data(preflight_shape(wildcards).run_id)


def preflight_plan_option(wildcards):
    """The fit row's plan of the shape's job (with a site), else none: the job plans itself."""
    shape = preflight_shape(wildcards)
    row = JOBS.fit_row(shape.run_id, shape.gpus) if SITE is not None and shape.gpus else None
    return [] if row is None else ["--planned-bytes", row["total_bytes"], "--budget-bytes", row["usable_bytes"]]


def preflight_job_resources():
    def job(wildcards):
        resources = JOBS.training("pretrain", preflight_shape(wildcards).run_id, check_preflight=False)
        return {**resources, "runtime": PREFLIGHT_RUNTIME_MIN} if "runtime" in resources else resources

    return JOBS.rule_resources(job, gpu=True, training=True)


RAY_RULES = {"pretrain", "finetune", "downstream", "spectra", "lyapunov", "frontier", "memory_probe", "preflight_job"}


onstart:
    # A local run of a preset without a Ray cluster: one Ray runtime for all of this run's Ray jobs.
    if config["ray"]["address"] is None and workflow.local_exec:
        if any(job.rule.name in RAY_RULES for job in workflow.dag.needrun_jobs()):
            logger.info(f"Ray for this run's jobs: {start_shared_local_ray(workflow.cores)}")
