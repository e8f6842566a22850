"""The preset and the site, the grid as run ids, the input functions the stages share, and every job's environment
(set in onstart, when jobs are about to run)."""

import json
import re

from snakemake.exceptions import WorkflowError

from pipeline.cli import runs_a_ray_task
from pipeline.commands import start_shared_local_ray
from pipeline.config import ConfigError, check_inside_results, downstream_task_dir, load_preset
from pipeline.data.prefetch import hub_items
from pipeline.data.rates import SITE_RATES
from pipeline.execution.job_env import (
    export_code_path,
    export_hub,
    export_ray_placement,
    export_trackers,
    export_xla_flags,
)
from pipeline.config.site import load_site
from pipeline.planning.grid import Grid
from pipeline.train.identity import TRAIN_STEP

SITE_FILE = config.pop("site", None)
PRESET_AS_GIVEN = {
    "preset": config.get("preset", "tiny"),
    "overrides": json.dumps(
        {key: value for key, value in config.items() if key not in ("preset", "ray")}, sort_keys=True
    ),
}
"""The params of a job whose verb loads the preset itself (``--preset``, ``--overrides``): the preset file or name
and the --config overrides as given, but where Ray runs, which changes none of their outputs."""
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
EVALUATE_TASK_DIR = downstream_task_dir(config)
EVALUATE_TASK_FILES = (
    sorted(str(path) for path in EVALUATE_TASK_DIR.iterdir() if path.suffix in {".yaml", ".jsonl", ".py"})
    if EVALUATE_TASK_DIR is not None
    else []
)
EVALUATED_RUN_PAIR = {run_id: pair for pair, run_ids in config["downstream"]["pairs"].items() for run_id in run_ids}
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
    finetune=one_of(GRID.finetunes),
    probe=one_of(GRID.probes),
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


def data_rate_input(wildcards):
    """At a site, a hub corpus's export and token caches are sized by the rates timed on a slice of it (rule
    data_rate), in the same call; ``ancient``: timing the slice again reruns no finished data job."""
    hub = config["datasets"][wildcards.dataset]["source"]["kind"] == "hf"
    return {"data_rate": ancient(f"{RESULTS}/{SITE_RATES}/{wildcards.dataset}.json")} if SITE and hub else {}


def slice_tokenizers(wildcards):
    """The pretrained tokenizers of the dataset's token caches (a BPE trained on the corpus does not exist yet)."""
    used = {job.tokenizer for job in GRID.workloads.values() if job.dataset == wildcards.dataset}
    return [f"{DATA}/tokenizers/{name}" for name in sorted(used) if config["tokenizers"][name]["kind"] == "pretrained"]


def data_inputs(job):
    """A grid job's token cache (a fine-tune's: its target dataset's) and tokenizer."""
    return {"cache": f"{DATA}/caches/{job.dataset}-{job.tokenizer}", "tokenizer": f"{DATA}/tokenizers/{job.tokenizer}"}


def run_inputs(wildcards):
    return data_inputs(GRID.pretraining[wildcards.run])


def finetune_inputs(wildcards):
    """The source run (complete: its summary), the target dataset's cache and the source's tokenizer."""
    job = GRID.finetunes[wildcards.finetune]
    return {"source": run_summary(job.run.run_id), **data_inputs(job)}


def require_inside_results(*targets):
    """Every planned output stays inside results/<preset>/, checked before anything runs."""
    try:
        check_inside_results(RESULTS, [path for group in targets for path in group])
    except ConfigError as error:
        raise WorkflowError(str(error)) from None


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


onstart:
    # Every job's environment (pipeline/execution/job_env.py), set once jobs are about to run, never while the
    # workflow is parsed: local jobs, SLURM jobs (sbatch hands on the submitting environment) and their Ray tasks
    # inherit it from this Snakemake.
    export_code_path(REPO_ROOT)
    export_ray_placement(config["ray"])
    export_xla_flags(config.get("xla_flags", ""))
    export_trackers(config.get("tracker", ["jsonl"]), config.get("wandb", {}))
    if SITE is not None:
        export_hub(SITE.hf_home, SITE.offline_nodes, SITE.hf_endpoint)
    # A local run of a preset without a Ray cluster: one Ray runtime for all of this run's Ray tasks.
    if config["ray"]["address"] is None and workflow.local_exec:
        if any(runs_a_ray_task(job.rule.shellcmd or "") for job in workflow.dag.needrun_jobs()):
            logger.info(f"Ray for this run's jobs: {start_shared_local_ray(workflow.cores)}")
