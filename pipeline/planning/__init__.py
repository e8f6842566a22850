"""Planning: what a preset's runs cost and need before anything runs, and the resources of every job.

``grid`` (a preset's jobs, enumerated once) and ``workloads`` (every job a preset trains or evaluates, one typed
``Workload`` each), ``cost`` (GPU-hours, data passes and checkpoint disk), ``fit`` (per-device memory planned on CPU
by XLA) and ``fit_table`` (its rows on disk), ``jobs`` and ``job_request`` (what each job asks of a SLURM site:
partition, GPUs, CPUs, memory, minutes, micro-batch). The workflow maps a job's request to its scheduler's resource
names; nothing here knows Snakemake. A "shape" is a preflight shape (``pipeline.preflight.shapes``).
"""
