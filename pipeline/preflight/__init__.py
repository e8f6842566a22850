"""The preflight: one short job per distinct training job shape of a preset, run by the real training code on the
GPUs, memory and micro-batch the site and fit table give that job, measured, reported and projected onto the grid.

``shapes`` (which jobs), ``job`` (one bounded job and its measurement row), ``report`` (md/csv/html and the
projection), ``measured`` (what the cost preview and job sizing read back). Nothing here writes a run folder.
"""
