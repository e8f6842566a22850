"""Previews of the preset's cost on GPUs, run on CPU: the per-device memory fit of every run (`snakemake fit`)."""

from pipeline.planning.fit import planned_jobs, plans_digest

FIT_DEVICE, FIT_GPUS = "h100", 8
# With a site (the slurm profile), every job is planned on the GPUs the site gives it and training jobs read their
# micro-batch from this table (pipeline/planning/jobs.py); without one, on FIT_GPUS GPUs of FIT_DEVICE.
FIT_TARGET = ["--site", SITE_FILE] if SITE_FILE is not None else ["--device", FIT_DEVICE, "--gpus", str(FIT_GPUS)]


checkpoint fit:  # the preflight's shapes are its jobs' micro-batches
    output:
        md=f"{RESULTS}/fit.md",
        csv=f"{RESULTS}/fit.csv",
    params:
        **PRESET_AS_GIVEN,  # the config this run resolved, so the table has the rows its jobs ask for
        target=FIT_TARGET + (["--preflight", f"{RESULTS}/preflight.csv"] if SITE_FILE is not None else []),
        # What every row means (runs as the preset defines them, GPUs, memory, GPU counts a preflight report gives):
        # a change plans the table again.
        plans=lambda wildcards: plans_digest(
            GRID, planned_jobs(GRID, FIT_DEVICE, FIT_GPUS, SITE, preflight_table=f"{RESULTS}/preflight.csv")
        ),
    log:
        f"{RESULTS}/logs/bench/fit.log",
    benchmark:
        f"{RESULTS}/benchmarks/bench/fit.tsv"
    resources:
        **cpu_resources("fit"),
        attempt=lambda wildcards, attempt: attempt,  # it keeps its rows: a chain where the partition is shorter
    retries: chain_retries(rule="fit")
    shell:
        "python -m pipeline fit --preset {params.preset:q} --overrides {params.overrides:q} {params.target:q}"
        " --md {output.md:q} --csv {output.csv:q} --attempt {resources.attempt:q} > {log:q} 2>&1"
