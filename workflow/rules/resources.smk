"""Each rule's `resources:` and `retries:`, from the job sizing of pipeline/planning/jobs.py (wiring: the names come
from pipeline/planning/placement.py, the values from each job's request; a job that cannot be sized stops the
workflow here). At a site with GPUs a GPU job's fit table and preflight report are its inputs (`sized_by`), planned
and measured in the same call, as a hub corpus's data rates are its data jobs' (`data_rate_input`): until they are
written its resources read <TBD>."""

from pipeline.planning.jobs import JobSizing
from pipeline.planning.measured import FitTableError, PreflightError
from pipeline.planning.placement import JobKind, WalltimeError, resource_names

JOBS = JobSizing(
    GRID,
    SITE,
    fit_table=f"{RESULTS}/fit.csv",
    preflight_table=f"{RESULTS}/preflight.csv",
    data_rates=f"{RESULTS}/{SITE_RATES}",
)
TIDY_FILE_RESOURCES = {"gpu": 0, "mem_mb": 2000, "runtime": 10}
"""A table, figure or scorecard job: seconds of CPU reading tidy files, run on the submit host (``localrule``)."""


def sized_by(*tables):
    """A GPU job's inputs among ``JOBS.tables`` (``fit``, ``preflight``), ``ancient``: planning or measuring again
    reruns no finished job."""
    return lambda wildcards: {name: ancient(path) for name, path in JOBS.tables.items() if name in tables}


def rule_resources(shape_of, kind):
    """A rule's ``resources:`` for its jobs of ``kind`` (a ``JobKind``): one callable of the job's wildcards and
    inputs per name, from the job's shape ``shape_of(jobs, wildcards)`` as the tables among its inputs stand; a job
    that cannot be sized, or a red preflight row, stops the workflow with one sentence."""

    def resource(name):
        def value(wildcards, input):
            jobs = JOBS.reading(input.get(table) for table in (*JOBS.tables, "data_rate") if table in input.keys())
            try:
                return shape_of(jobs, wildcards).resources()[name]
            except (FitTableError, PreflightError, WalltimeError) as error:
                raise WorkflowError(str(error)) from None

        return value

    return {name: resource(name) for name in resource_names(SITE, kind)}


def training_resources(wildcard):
    """A training rule's resources: per run (its ``wildcard``) from its size, the site and the fit table."""
    return rule_resources(lambda jobs, wildcards: jobs.green().training(getattr(wildcards, wildcard)), JobKind.TRAINING)


def chain_retries(workload_ids=(), rule=None):
    """The retries of a training rule (training ``workload_ids``) or a data rule (``rule``), from their chains
    (pipeline.planning.jobs.JobSizing.chain_retries, data_retries: estimated before the preflight, measured after);
    None: this command's --retries. Only the submitting Snakemake retries: inside a SLURM job (its jobstep's Snakemake)
    a chunk stopped by its walltime warning is not restarted in the seconds left of its allocation."""
    if not workflow.is_main_process:
        return None
    try:
        return JOBS.data_retries(rule) if rule else JOBS.chain_retries(workload_ids)
    except WalltimeError as error:
        raise WorkflowError(str(error)) from None


def memory_probe_resources():
    return rule_resources(lambda jobs, wildcards: jobs.memory_probe(wildcards.probe), JobKind.GPU)


def gpu_analysis_resources(rule):
    """One GPU at a site with GPUs (the run is the ``run`` wildcard); lm-eval's (``downstream``) for its requests'
    estimated GPU-hours."""
    return rule_resources(lambda jobs, wildcards: jobs.green().gpu_analysis(rule, wildcards.run), JobKind.GPU)


def cpu_resources(rule):
    """A CPU job's resources; the corpus export's and the token cache's per dataset (the ``dataset`` wildcard),
    with their chunks where they are chains (pipeline.planning.jobs.JobSizing.cpu)."""
    return rule_resources(lambda jobs, wildcards: jobs.cpu(rule, wildcards.get("dataset")), JOBS.cpu_kind(rule))
