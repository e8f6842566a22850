"""Evaluation stage: lm-evaluation-harness downstream tasks on trained runs (App. C.7, Tables 4-5). Holds what the
stage's writer and the report's reader share, without lm-eval (the report's jobs of seconds do not load it)."""

BATCH_SIZE = 32
"""lm-eval requests scored per forward pass (the ``downstream`` verb's default; the rule passes none, and the fit
table plans a downstream job at this batch)."""
DOWNSTREAM_COLUMNS = ["run_id", "family", "pair", "task", "shots", "metric", "value", "stderr", "n_samples"]
"""``downstream.csv``: one metric (with its standard error and sample count) of one task at ``shots`` shots for one
run of a pair."""
