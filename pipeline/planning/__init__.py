"""Planning: what a preset's runs cost and need before anything runs, and the resources of every job
(docs/planning.md#where-planning-lives names each module's part). A job's request renders itself under the
scheduler's resource names, and nothing here imports Snakemake. A "shape" is a preflight shape
(``preflight_jobs.Shape``).
"""
