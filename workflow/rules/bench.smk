"""Previews of the preset's cost on GPUs, run on CPU: the per-device memory fit of every run (`snakemake fit`)."""

FIT_DEVICE = "h100"


rule fit:
    output:
        md=f"{RESULTS}/fit.md",
        csv=f"{RESULTS}/fit.csv",
    params:
        preset=PRESET,
        device=FIT_DEVICE,
    log:
        f"{RESULTS}/logs/bench/fit.log",
    benchmark:
        f"{RESULTS}/benchmarks/bench/fit.tsv"
    resources:
        gpu=0,
        mem_mb=32000,
        runtime=240,
    shell:
        "python -m pipeline fit --preset {params.preset:q} --device {params.device:q}"
        " --md {output.md:q} --csv {output.csv:q} > {log:q} 2>&1"
