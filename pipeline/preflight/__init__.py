"""The preflight: one short job per distinct training job shape of a preset, run by the real training code on the GPUs,
memory and micro-batch the site and fit table give that job, measured, reported and projected onto the grid.

Its jobs are the grid's (``pipeline.planning.preflight_jobs``: ``Shape``, ``StageJob``); ``job`` (one bounded training
job and its measurement row), ``stages`` (the work of the jobs after pretraining), ``report`` (md/csv/html and the
projection); job sizing and the cost preview read the report back (``pipeline.planning.measured``). Nothing here writes
a run folder.
"""
