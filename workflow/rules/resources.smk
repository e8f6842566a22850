"""Each rule's `resources:` and `retries:`, from the job sizing of pipeline/planning/jobs.py (wiring: the names come
from pipeline/planning/placement.py, the values from each job's request; a job that cannot be sized stops the
workflow here)."""

from pipeline.planning.placement import JobKind
from pipeline.planning.jobs import JobSizing
from pipeline.planning.measured import FitTableError, PreflightError
from pipeline.planning.placement import WalltimeError, resource_names

JOBS = JobSizing(GRID, SITE, fit_table=f"{RESULTS}/fit.csv", preflight_table=f"{RESULTS}/preflight.csv")
PLAN_COMMAND = "snakemake --profile profiles/slurm fit, with this command's --config"
"""How the fit table is planned again, added to a job-sizing error (pipeline/planning/jobs.py)."""
PREFLIGHT_COMMAND = "snakemake --profile profiles/slurm preflight, with this command's --config"
"""How the preflight is run again, added to a red preflight row's sentence (pipeline/planning/measured.py)."""
TIDY_FILE_RESOURCES = {"gpu": 0, "mem_mb": 2000, "runtime": 10}
"""A table, figure or scorecard job: seconds of CPU reading tidy files, run on the submit host (``localrule``)."""


def rule_resources(shape_of, kind):
    """A rule's ``resources:`` for its jobs of ``kind`` (a ``JobKind``): one callable of the job's wildcards per
    name, from the job's shape ``shape_of(wildcards)``; a job the fit table cannot size, or whose preflight row is
    red, stops the workflow with one sentence."""

    def resource(name):
        def value(wildcards):
            try:
                return shape_of(wildcards).resources()[name]
            except FitTableError as error:
                raise WorkflowError(f"{str(error).rstrip('.')} ({PLAN_COMMAND}).") from None
            except PreflightError as error:
                raise WorkflowError(f"{str(error).rstrip('.')} ({PREFLIGHT_COMMAND}).") from None
            except WalltimeError as error:
                raise WorkflowError(str(error)) from None

        return value

    return {name: resource(name) for name in resource_names(SITE, kind)}


def training_resources(wildcard):
    """A training rule's resources: per run (its ``wildcard``) from its size, the site and the fit table."""
    return rule_resources(lambda wildcards: JOBS.training(getattr(wildcards, wildcard)), JobKind.TRAINING)


def chain_retries(workload_ids=(), rule=None):
    """The retries of a training rule (training ``workload_ids``) or a data rule (``rule``), from their chains
    (pipeline.planning.jobs.JobSizing.chain_retries, data_retries); None: this command's --retries. Only the
    submitting Snakemake retries: inside a SLURM job (its jobstep's Snakemake) a chunk stopped by its walltime warning
    is not restarted in the seconds left of its allocation."""
    if not workflow.is_main_process:
        return None
    try:
        return JOBS.data_retries(rule) if rule else JOBS.chain_retries(workload_ids)
    except WalltimeError as error:
        raise WorkflowError(str(error)) from None


def memory_probe_resources():
    return rule_resources(lambda wildcards: JOBS.memory_probe(wildcards.probe), JobKind.GPU)


def gpu_analysis_resources(rule):
    """One GPU at a site with GPUs (the run is the ``run`` wildcard)."""
    return rule_resources(lambda wildcards: JOBS.gpu_analysis(rule, wildcards.run), JobKind.GPU)


def downstream_resources():
    """lm-eval's GPU, for its requests' estimated GPU-hours (the run is the ``run`` wildcard)."""
    return rule_resources(lambda wildcards: JOBS.downstream(wildcards.run), JobKind.GPU)


def cpu_resources(rule):
    """A CPU job's resources; the corpus export's and the token cache's per dataset (the ``dataset`` wildcard),
    with their chunks where they are chains (pipeline.planning.jobs.JobSizing.cpu)."""
    return rule_resources(lambda wildcards: JOBS.cpu(rule, wildcards.get("dataset")), JOBS.cpu_kind(rule))
