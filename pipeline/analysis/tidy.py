"""The columns of the tidy CSVs the analysis stage writes and the report reads: the one definition both import
(a module without JAX, so the report's jobs of seconds do not load it)."""

SPECTRA_COLUMNS = ["run_id", "family", "dataset", "matrix", "t", "layer", "head", "index", "real", "imag"]
"""``spectra.csv``: one eigenvalue (``real`` + i·``imag``) of one matrix (QK, OV, FF) of one head at time ``t``."""
LYAPUNOV_COLUMNS = ["run_id", "sentence_id", "position", "token", "exponent_index", "exponent"]
"""``lyapunov.csv``: one exponent of one token of one sentence."""
FRONTIER_COLUMNS = [
    "run_id",
    "family",
    "dataset",
    "trained_steps",
    "solver",
    "num_steps",
    "step_factor",
    "field_evaluations",
    "val_loss",
    "val_ppl",
]
"""``frontier.csv``: one (solver, number of steps) evaluation of one trained run."""
FRONTIER_VERSION = "document-mask-1"
"""The frontier's version, a param of its rule: ``document-mask-1`` attends within packed documents as training does;
a CSV computed before (attending across them, up to 3e-4 off) reruns instead of being kept."""
PARAM_COUNT_COLUMNS = ["model", "time_embed_dim", "parameters"]
"""``param_counts.csv``: one model's parameter count (``time_embed_dim`` empty for a baseline)."""
