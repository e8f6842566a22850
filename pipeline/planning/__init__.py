"""Planning: what a preset's runs cost and need before anything runs, and the resources of every job.

``grid`` (a preset's jobs, enumerated once as typed objects: one ``Workload`` per job it trains or evaluates, the GPU
analyses), ``preflight_jobs`` (the preflight's shapes and stage jobs), ``cost`` (GPU-hours, data passes and checkpoint
disk), ``fit`` (per-device memory planned on CPU by XLA) and ``fit_table`` (its rows on disk), ``jobs`` and
``placement`` (what each job asks of a SLURM site: partition, GPUs, CPUs, memory, minutes, micro-batch); a job's request
renders itself under the scheduler's resource names, and nothing here imports Snakemake. A "shape" is a preflight shape
(``preflight_jobs.Shape``).
"""
