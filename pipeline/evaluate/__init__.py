"""Evaluation stage: lm-evaluation-harness downstream tasks on trained runs (App. C.7, Tables 4-5)."""
