"""Planning: what a preset's runs cost and need before anything runs, and the resources of every job.

``workloads`` (every job a preset trains or evaluates, one ``Workload`` each), ``cost`` (GPU-hours, data passes and
checkpoint disk), ``fit`` (per-device memory planned on CPU by XLA) and ``fit_table`` (its rows on disk), ``jobs``
(each job's shape at a SLURM site: partition, GPUs, CPUs, memory, minutes, micro-batch). The workflow maps a job's
shape to its scheduler's resource names; nothing here knows Snakemake.
"""
