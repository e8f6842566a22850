"""The columns of ``downstream.csv``, which the evaluate stage writes and the report reads: the one definition both
import (a module without lm-eval, so the report's jobs of seconds do not load it)."""

DOWNSTREAM_COLUMNS = ["run_id", "family", "pair", "task", "shots", "metric", "value", "stderr", "n_samples"]
"""One metric (with its standard error and sample count) of one task at ``shots`` shots for one run of a pair."""
