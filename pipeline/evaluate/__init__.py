"""Evaluation stage: lm-evaluation-harness downstream tasks on trained runs (App. C.7, Tables 4-5)."""

BATCH_SIZE = 32
"""lm-eval requests scored per forward pass (the ``downstream`` verb's default; the rule passes none, and the fit
table plans a downstream job at this batch)."""
