"""Preset loading, the experiment grid as run ids, and target functions."""

import json

from snakemake.exceptions import WorkflowError

from pipeline.commands import export_ray_placement
from pipeline.data.prefetch import hub_items
from pipeline.config import ConfigError, finetune_runs, load_preset, memory_probes, pretrain_runs
from pipeline.site import JobResources, export_site_environment, load_site

_site_file = config.pop("site", None)
try:
    _resolved = load_preset(config)
    SITE = load_site(_site_file) if _site_file is not None else None
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
ENV = "../../environment.yml"
HUB_ITEMS = hub_items(config)
PREFETCH_MANIFEST = f"{DATA}/prefetch.json"
# Jobs that read the hub read the shared cache the prefetch filled (nothing to fetch: no prefetch job).
PREFETCHED = [PREFETCH_MANIFEST] if any(HUB_ITEMS.values()) else []

wildcard_constraints:
    dataset="|".join(config["datasets"]),
    tokenizer="|".join(config["tokenizers"]),
    run="|".join(RUNS),
    finetune="|".join(FINETUNE_RUNS),
    probe="|".join(MEMORY_PROBES),


def run_summary(run_id):
    return f"{RESULTS}/runs/{run_id}/summary.json"


def corpus_source(wildcards):
    return json.dumps(config["datasets"][wildcards.dataset]["source"], sort_keys=True)


def tokenizer_spec(wildcards):
    return json.dumps(config["tokenizers"][wildcards.tokenizer], sort_keys=True)


def tokenizer_corpora(wildcards):
    return [f"{DATA}/corpora/{dataset}" for dataset in config["tokenizers"][wildcards.tokenizer].get("train_on", [])]


def run_inputs(wildcards):
    spec = RUNS[wildcards.run]
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


def training_resources(stage, wildcard):
    """A training rule's resources: per run (its ``wildcard``) from its size and the site (pipeline/site.py)."""
    return JOBS.rule_resources(lambda wildcards: JOBS.training(stage, getattr(wildcards, wildcard)), gpu=True)


def gpu_analysis_resources(rule):
    """One GPU at a site with GPUs (the run is the ``run`` wildcard)."""
    return JOBS.rule_resources(lambda wildcards: JOBS.gpu_analysis(rule, wildcards.run), gpu=True)


def cpu_resources(rule):
    return JOBS.rule_resources(lambda wildcards: JOBS.cpu(rule), gpu=False)


JOBS = JobResources(config, SITE)
export_ray_placement(config["ray"])
export_site_environment(SITE)
