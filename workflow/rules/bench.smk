"""Previews of the preset's cost on GPUs, run on CPU: the per-device memory fit of every run (`snakemake fit`)."""

FIT_DEVICE = "h100"
# With a site (the slurm profile), every job is planned on the GPUs the site gives it and training jobs read their
# micro-batch from this table (pipeline/site.py); without one, on 8 GPUs of FIT_DEVICE.
FIT_TARGET = ["--site", SITE_FILE] if SITE_FILE is not None else ["--device", FIT_DEVICE]


rule fit:
    output:
        md=f"{RESULTS}/fit.md",
        csv=f"{RESULTS}/fit.csv",
    params:
        preset=PRESET,
        target=FIT_TARGET,
    log:
        f"{RESULTS}/logs/bench/fit.log",
    benchmark:
        f"{RESULTS}/benchmarks/bench/fit.tsv"
    resources:
        **cpu_resources("fit"),
    shell:
        "python -m pipeline fit --preset {params.preset:q} {params.target:q}"
        " --md {output.md:q} --csv {output.csv:q} > {log:q} 2>&1"
