"""Preset loading, the experiment grid as run ids, and target functions."""

import dataclasses
import functools
import json
import os
import re

from snakemake.exceptions import WorkflowError

from pipeline.commands import start_shared_local_ray
from pipeline.config import ConfigError, check_inside_results, downstream_task_dir, load_preset
from pipeline.data.prefetch import hub_items
from pipeline.execution.job_env import export_code_path, export_hub, export_ray_placement, export_trackers, export_xla_flags
from pipeline.planning.fit import plans_digest
from pipeline.planning.grid import Grid
from pipeline.planning.jobs import FitTableError, JobSizing, WalltimeError
from pipeline.planning.preflight_rows import PreflightError
from pipeline.site import load_site
from pipeline.analysis.tidy import FRONTIER_VERSION
from pipeline.preflight.shapes import PREFLIGHT_RUNTIME_MIN, run_shapes, training_shapes
from pipeline.preflight.stages import STAGE_KINDS, DownstreamStage, FinetuneStage, stage_jobs
from pipeline.train.identity import TRAIN_STEP

SITE_FILE = config.pop("site", None)
GIVEN_CONFIG = dict(config)
"""The preset and the --config overrides as given (what a job that loads the preset itself, ``fit``, is passed)."""
try:
    _resolved = load_preset(config)
    SITE = load_site(SITE_FILE) if SITE_FILE is not None else None
except (ConfigError, FileNotFoundError, ValueError) as error:
    raise WorkflowError(str(error)) from None
config.clear()
config.update(_resolved)

PRESET = config["preset"]
RESULTS = f"{SITE.results_dir if SITE and SITE.results_dir else 'results'}/{PRESET}"
DATA = f"{RESULTS}/data"
GRID = Grid.load(config)
"""The preset's jobs, enumerated once per parse (pipeline/planning/grid.py): every job below is one of them."""
RUNS = GRID.runs
FINETUNE_RUNS = {run_id: job.finetune for run_id, job in GRID.finetunes.items()}
MEMORY_PROBES = {probe_id: job.run for probe_id, job in GRID.probes.items()}
EVALUATE_TASK_DIR = downstream_task_dir(config)
HUB_ITEMS = hub_items(config)
HUB_DATASETS = {item["name"]: item for item in HUB_ITEMS["datasets"]}
HUB_TOKENIZERS = {item["name"]: item for item in HUB_ITEMS["tokenizers"]}
PREFETCH = f"{DATA}/prefetch"
# Each hub item is its own prefetch job and record; a job that reads an item reads the shared cache the item's
# prefetch filled, at the commit its record holds (local items: nothing to fetch, no record).
PREFETCH_RECORDS = (
    [f"{PREFETCH}/datasets/{name}.json" for name in HUB_DATASETS]
    + [f"{PREFETCH}/tokenizers/{name}.json" for name in HUB_TOKENIZERS]
    + [f"{PREFETCH}/lm_eval/{task}.json" for task in HUB_ITEMS["lm_eval_tasks"]]
)


def one_of(names):
    """A wildcard constraint matching exactly these names (ids may contain '.', a regex wildcard)."""
    return "|".join(re.escape(name) for name in names)


wildcard_constraints:
    dataset=one_of(config["datasets"]),
    tokenizer=one_of(config["tokenizers"]),
    run=one_of(RUNS),
    finetune=one_of(FINETUNE_RUNS),
    probe=one_of(MEMORY_PROBES),
    task=one_of(HUB_ITEMS["lm_eval_tasks"]),


def run_summary(run_id):
    return f"{RESULTS}/runs/{run_id}/summary.json"


def corpus_source(wildcards):
    return json.dumps(config["datasets"][wildcards.dataset]["source"], sort_keys=True)


def tokenizer_spec(wildcards):
    return json.dumps(config["tokenizers"][wildcards.tokenizer], sort_keys=True)


def dataset_prefetched(wildcards):
    return [f"{PREFETCH}/datasets/{wildcards.dataset}.json"] if wildcards.dataset in HUB_DATASETS else []


def tokenizer_prefetched(wildcards):
    return [f"{PREFETCH}/tokenizers/{wildcards.tokenizer}.json"] if wildcards.tokenizer in HUB_TOKENIZERS else []


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


PLAN_COMMAND = "snakemake --profile profiles/slurm fit, with this command's --config"
"""How the fit table is planned again, added to a job-sizing error (pipeline/planning/jobs.py)."""
PREFLIGHT_COMMAND = "snakemake --profile profiles/slurm preflight, with this command's --config"
"""How the preflight is run again, added to a red preflight row's sentence (pipeline/planning/preflight_rows.py)."""


def resource_names(kind):
    """The names of the resources each job of a kind has (``training``, ``gpu`` or ``cpu``: ``gpu`` only without a
    site; with one, also placement and limits, ``gpu_model`` for GPU jobs where the site names one, and each
    sbatch option the site sets for the kind; ``micro_batch`` for training jobs)."""
    micro_batch = ["micro_batch"] if kind == "training" else []
    if SITE is None:
        return ["gpu", *micro_batch]
    placement = JOBS.placement(kind)
    optional = {
        "slurm_account": placement.account,
        "qos": placement.qos,
        "constraint": placement.constraint,
        "slurm_extra": placement.flags(),
        "gpu_model": kind != "cpu" and SITE.gpus_per_node and SITE.gpu_model,
    }
    names = ["slurm_partition", "nodes", "gpu", "cpus_per_task", "mem_mb", "runtime", "needed_min"]
    chunks = ["chunks"] if kind == "training" else []
    return names + [name for name, value in optional.items() if value] + micro_batch + chunks


def resource_values(shape):
    """A job's shape (pipeline.planning.jobs.JobRequest) under Snakemake's and the SLURM executor plugin's names."""
    values = {"gpu": shape.gpus, "micro_batch": shape.micro_batch}
    if shape.placement is not None:
        values |= {
            "slurm_partition": shape.placement.partition,
            "slurm_account": shape.placement.account,
            "qos": shape.placement.qos,
            "constraint": shape.placement.constraint,
            "slurm_extra": " ".join(shape.sbatch_flags),
            "nodes": 1,
            "gpu_model": shape.gpu_model,
            "cpus_per_task": shape.cpus,
            "mem_mb": shape.mem_mb,
            "runtime": shape.minutes,
            "needed_min": shape.minutes if shape.needed_minutes is None else shape.needed_minutes,
            "chunks": shape.chunks,
        }
    return values


def rule_resources(shape_of, kind):
    """A rule's ``resources:``: one callable of the job's wildcards per name, from the job's shape
    ``shape_of(wildcards)``; a job the fit table cannot size, or whose preflight row is red, stops the
    workflow with one sentence."""

    def resource(name):
        def value(wildcards):
            try:
                return resource_values(shape_of(wildcards))[name]
            except FitTableError as error:
                raise WorkflowError(f"{str(error).rstrip('.')} ({PLAN_COMMAND}).") from None
            except PreflightError as error:
                raise WorkflowError(f"{str(error).rstrip('.')} ({PREFLIGHT_COMMAND}).") from None
            except WalltimeError as error:
                raise WorkflowError(str(error)) from None

        return value

    return {name: resource(name) for name in resource_names(kind)}


def training_resources(wildcard):
    """A training rule's resources: per run (its ``wildcard``) from its size, the site and the fit table."""
    return rule_resources(lambda wildcards: JOBS.training(getattr(wildcards, wildcard)), "training")


def chain_retries(workload_ids):
    """A training rule's retries (pipeline.planning.jobs.JobSizing.chain_retries); None: this command's --retries.
    Only the submitting Snakemake retries: inside a SLURM job (its jobstep's Snakemake) a chunk stopped by its
    walltime warning is not restarted in the seconds left of its allocation."""
    if not workflow.is_main_process:
        return None
    try:
        return JOBS.chain_retries(workload_ids)
    except WalltimeError as error:
        raise WorkflowError(str(error)) from None


def memory_probe_resources():
    return rule_resources(lambda wildcards: JOBS.memory_probe(wildcards.probe), "gpu")


def gpu_analysis_resources(rule):
    """One GPU at a site with GPUs (the run is the ``run`` wildcard)."""
    return rule_resources(lambda wildcards: JOBS.gpu_analysis(rule, wildcards.run), "gpu")


def cpu_resources(rule):
    return rule_resources(lambda wildcards: JOBS.cpu(rule), "cpu")


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


JOBS = JobSizing(GRID, SITE, fit_table=f"{RESULTS}/fit.csv", preflight_table=f"{RESULTS}/preflight.csv")
export_code_path(REPO_ROOT)
export_ray_placement(config["ray"])
export_xla_flags(config.get("xla_flags", ""))
export_trackers(config.get("tracker", ["jsonl"]), config.get("wandb", {}))
if SITE is not None:
    export_hub(SITE.hf_home, SITE.offline_nodes, SITE.hf_endpoint)

# The preflight (rules/preflight.smk): its job shapes, sized like the grid's runs, each job's inputs and resources.
PREFLIGHT = f"{RESULTS}/preflight"
PREFLIGHT_DEVICE = SITE.device if SITE is not None else "cpu"


wildcard_constraints:
    shape="[a-z0-9_.]+-[a-z0-9_.]+-g[0-9]+-mb[0-9]+",
    kind=one_of(STAGE_KINDS),


@functools.cache
def preflight_shapes():
    """The shapes, sized like the grid's runs (with a site: from the fit table, which must exist by now)."""
    try:
        return training_shapes(JOBS)
    except ValueError as error:
        raise WorkflowError(str(error)) from None


@functools.cache
def preflight_stage_jobs():
    """The fine-tune, lm-eval and analysis jobs, each on the preflight checkpoint of its source run's shape."""
    return stage_jobs(GRID, run_shapes(preflight_shapes()))


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
    """A preflight job is sized as the run it trains, for its shape's own walltime (pipeline/preflight/shapes.py)."""

    def shape_of(wildcards):
        preflight = preflight_shape(wildcards)
        shape = JOBS.training(preflight.run_id, check_preflight=False)
        return shape if shape.minutes is None else preflight_walltime(shape, preflight.minutes)

    return rule_resources(shape_of, "training")


def preflight_stage_inputs(wildcards):
    """The source shape's preflight row (its checkpoint beside it), the tokenizer, and the token cache: a fine-tune's
    target's, else the source run's; lm-eval also its task files and prefetch records."""
    job = preflight_stage_jobs()[wildcards.kind]
    inputs = {"source": f"{PREFLIGHT}/{job.source_shape}/row.json"}
    if isinstance(job, FinetuneStage):
        spec = FINETUNE_RUNS[job.run_id]
        inputs |= {
            "cache": f"{DATA}/caches/{spec.target_dataset}-{spec.tokenizer}",
            "tokenizer": f"{DATA}/tokenizers/{spec.tokenizer}",
        }
    else:
        inputs |= run_data(job.run_id)
    if isinstance(job, DownstreamStage):
        inputs |= {
            "task_files": EVALUATE_TASK_FILES,
            "prefetched": [f"{PREFETCH}/lm_eval/{task}.json" for task in HUB_ITEMS["lm_eval_tasks"]],
        }
    return inputs


def preflight_stage_settings(wildcards, input):
    """What the stage's verb is given besides paths, as JSON: the fine-tune's spec, or the preset's section."""
    job = preflight_stage_jobs()[wildcards.kind]
    if isinstance(job, FinetuneStage):
        return FINETUNE_RUNS[job.run_id].to_json()
    if isinstance(job, DownstreamStage):
        task_dir = None if EVALUATE_TASK_DIR is None else str(EVALUATE_TASK_DIR)
        settings = {**config["downstream"], "task_dir": task_dir, "pair": EVALUATED_RUN_PAIR[job.run_id]}
        return json.dumps({**settings, "prefetched": [os.path.abspath(path) for path in input.prefetched]})
    return json.dumps(config["analysis"][job.kind])


def preflight_stage_shape(wildcards):
    """A stage job's shape: its fine-tune's or analysis's, for ``PREFLIGHT_RUNTIME_MIN`` minutes."""
    shape = preflight_stage_jobs()[wildcards.kind].resources(JOBS)
    return shape if shape.minutes is None else preflight_walltime(shape, PREFLIGHT_RUNTIME_MIN)


def preflight_walltime(shape, minutes):
    """A preflight job's shape: the job it stands for, for ``minutes`` in one chunk."""
    return dataclasses.replace(shape, minutes=minutes, needed_minutes=minutes, chunks=1)


RAY_RULES = {
    "pretrain",
    "finetune",
    "downstream",
    "spectra",
    "lyapunov",
    "frontier",
    "memory_probe",
    "preflight_job",
    "preflight_stage",
}


onstart:
    # A local run of a preset without a Ray cluster: one Ray runtime for all of this run's Ray jobs.
    if config["ray"]["address"] is None and workflow.local_exec:
        if any(job.rule.name in RAY_RULES for job in workflow.dag.needrun_jobs()):
            logger.info(f"Ray for this run's jobs: {start_shared_local_ray(workflow.cores)}")
