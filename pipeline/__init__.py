"""DiffEqFormer reproduction pipeline: all the science the Snakemake rules call (`python -m pipeline`)."""
