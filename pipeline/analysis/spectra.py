"""Spectral dynamics of the attention heads and the feed-forward block (paper §5.1, Fig. 2a/b, App. E;
docs/experiments.md#analyses). QK = W_Q^h (W_K^h)^T and OV = W_V^h W_O^h have rank ≤ d (head size) and share their
non-zero eigenvalues with the d×d (W_K^h)^T W_Q^h, resp. W_O^h W_V^h (the hidden − d zeros are left out);
FF = W_fc W_proj (docs/paper.md#spectra) has ``head`` 0. DiffEqFormer is sampled ``time_oversampling``× finer than
its steps, GPT at t = (layer + 1)/L."""

from pathlib import Path

import numpy as np
import pandas as pd

from pipeline.analysis.tidy import SPECTRA_COLUMNS


def head_spectra(w_q: np.ndarray, w_k: np.ndarray, w_v: np.ndarray, w_o: np.ndarray) -> dict[str, np.ndarray]:
    """Non-zero eigenvalues of QK and OV for a batch of heads; ``w_q``, ``w_k``, ``w_v``: [..., heads, hidden,
    head_size], ``w_o``: [..., heads, head_size, hidden]. Returns ``{"QK": λ, "OV": λ}``, complex
    [..., heads, head_size], rows sorted by decreasing |λ|."""
    return {"QK": by_magnitude(np.swapaxes(w_k, -1, -2) @ w_q), "OV": by_magnitude(w_o @ w_v)}


def by_magnitude(matrices: np.ndarray) -> np.ndarray:
    """Eigenvalues of a batch of square ``matrices`` (in float64), each row sorted by decreasing |λ|."""
    eigenvalues = np.linalg.eigvals(matrices.astype(np.float64))
    order = np.argsort(-np.abs(eigenvalues), axis=-1, kind="stable")
    return np.take_along_axis(eigenvalues, order, axis=-1)


WEIGHT_AXES = (
    ("embed", "qkv", "heads", "head_size"),
    ("heads", "head_size", "embed"),
    ("embed", "mlp"),
    ("mlp", "embed"),
)
"""The axes after the time axis of the attention's c_attn, c_proj and the feed-forward's c_fc, c_proj."""


def gpt_weights(model) -> tuple:
    """Per-layer weights of a GPT at t = (layer + 1)/L: (c_attn [t, embed, qkv, heads, head_size], c_proj [t, heads,
    head_size, embed], times t, layer index of each t, feed-forward (c_fc [t, embed, mlp], c_proj [t, mlp, embed]))."""
    block = model.transformer.blocks.stacked
    weights = (block.attn.c_attn.weight, block.attn.c_proj.weight, block.mlp.c_fc.weight, block.mlp.c_proj.weight)
    c_attn, c_proj, c_fc, ff_proj = (
        np.asarray(weight.rearrange(("layers", *axes)).array) for weight, axes in zip(weights, WEIGHT_AXES, strict=True)
    )
    num_layers = c_attn.shape[0]
    return c_attn, c_proj, (np.arange(num_layers) + 1.0) / num_layers, list(range(num_layers)), (c_fc, ff_proj)


def diffeq_weights(model, time_oversampling: int) -> tuple:
    """The same of a DiffEqFormer, W(t) generated for all t at once on t_m = m/(kL), m = 1..kL (k =
    ``time_oversampling``) of its Euler time grid (``fidelity.time_grid``: at k = 1 the times its L steps are trained
    at); the layer of t is the trained Euler step whose interval ((l)/L, (l+1)/L] holds it."""
    import haliax as hax

    field = model.transformer.field
    Time = hax.Axis("time", time_oversampling * model.config.num_layers)
    times = field.times(hax.arange(Time) + 1, Time.size)
    linears = (field.attn.c_attn, field.attn.c_proj, field.mlp.c_fc, field.mlp.c_proj)
    c_attn, c_proj, c_fc, ff_proj = (
        np.asarray(linear.weights_at(times, field.shared_mlp)[0].rearrange(("time", *axes)).array)
        for linear, axes in zip(linears, WEIGHT_AXES, strict=True)
    )
    steps = np.arange(1, Time.size + 1)
    return c_attn, c_proj, steps / Time.size, list((steps - 1) // time_oversampling), (c_fc, ff_proj)


def feedforward_spectra(w_fc: np.ndarray, w_proj: np.ndarray) -> np.ndarray:
    """Eigenvalues of FF = W_fc W_proj for a batch of times: ``w_fc`` [..., hidden, mlp], ``w_proj`` [..., mlp,
    hidden]; complex [..., hidden], each row sorted by decreasing |λ|."""
    return by_magnitude(w_fc.astype(np.float64) @ w_proj.astype(np.float64))


def spectra_table(
    c_attn: np.ndarray,
    c_proj: np.ndarray,
    times: np.ndarray,
    layers: list[int],
    feedforward: tuple[np.ndarray, np.ndarray] | None,
    labels: dict[str, str],
) -> pd.DataFrame:
    """The tidy table (``SPECTRA_COLUMNS``) of QK and OV eigenvalues of every head at every time, and of FF at every
    time when ``feedforward`` = (W_fc, W_proj) is given."""
    w_q, w_k, w_v = (np.moveaxis(c_attn[:, :, i], 1, -2) for i in range(3))
    spectra = head_spectra(w_q, w_k, w_v, c_proj)
    if feedforward is not None:
        spectra["FF"] = feedforward_spectra(*feedforward)[:, None]
    frames = []
    for matrix, eigenvalues in spectra.items():
        n_times, n_heads, n_eig = eigenvalues.shape
        t_idx, head, index = np.meshgrid(np.arange(n_times), np.arange(n_heads), np.arange(n_eig), indexing="ij")
        frames.append(
            pd.DataFrame(
                {
                    "matrix": matrix,
                    "t": np.asarray(times)[t_idx.ravel()],
                    "layer": np.asarray(layers)[t_idx.ravel()],
                    "head": head.ravel(),
                    "index": index.ravel(),
                    "real": eigenvalues.real.ravel(),
                    "imag": eigenvalues.imag.ravel(),
                }
            )
        )
    table = pd.concat(frames, ignore_index=True)
    for column, value in labels.items():
        table[column] = value
    return table[SPECTRA_COLUMNS]


def trained_times(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of a spectra table at the trained times t = (layer + 1)/L, as the authors' spectra sample
    (docs/paper.md#spectra); a DiffEqFormer's oversampled times are for figures only."""
    num_layers = table["layer"].max() + 1
    return table[np.isclose(table["t"], (table["layer"] + 1) / num_layers)]


def spectral_trend(table: pd.DataFrame) -> pd.DataFrame:
    """Claim "spectra grow with t": per matrix (QK, OV) and head, Spearman ρ of the head's largest |λ| against t
    over ``trained_times`` (NaN when either is constant). Returns columns matrix, head, rho, points."""
    attention = trained_times(table[table["matrix"].isin(["QK", "OV"])])
    magnitude = np.hypot(attention["real"], attention["imag"])
    largest = (
        magnitude.groupby([attention["matrix"], attention["head"], attention["t"]]).max().reset_index(name="largest")
    )
    rows = [
        (matrix, head, float(rows_of_head["t"].corr(rows_of_head["largest"], method="spearman")), len(rows_of_head))
        for (matrix, head), rows_of_head in largest.groupby(["matrix", "head"])
    ]
    return pd.DataFrame(rows, columns=["matrix", "head", "rho", "points"])


def model_spectra(spec, model, time_oversampling: int) -> pd.DataFrame:
    """The spectra table of ``model``, a GPT or DiffEqFormer of run ``spec``."""
    family = spec.model.family
    if family not in ("diffeq", "gpt"):
        raise ValueError(
            f"run {spec.run_id}: model.family is {family!r}; spectra need a GPT-style model (diffeq or gpt)."
        )
    weights = diffeq_weights(model, time_oversampling) if family == "diffeq" else gpt_weights(model)
    return spectra_table(*weights, labels={"run_id": spec.run_id, "family": family, "dataset": spec.dataset})


def run_spectra(run_dir: str, tokenizer_dir: str, out_csv: str, time_oversampling: int, untrained_csv: str) -> dict:
    """Load a trained run and write its spectra table to ``out_csv``, and that of an untrained model of the same
    config (initialised from the run's seed by its init scheme: the control) to ``untrained_csv``; returns a short
    summary."""
    import jax
    from haliax import Axis
    from levanter.compat.hf_checkpoints import load_tokenizer

    from pipeline.artifacts import atomic_write_text
    from pipeline.models import build_initialised
    from pipeline.models.checkpoint import load_run_model, run_model_config

    vocab_size = len(load_tokenizer(tokenizer_dir))
    spec, model = load_run_model(run_dir, vocab_size)
    table = model_spectra(spec, model, time_oversampling)
    atomic_write_text(Path(out_csv), table.to_csv(index=False))
    untrained = build_initialised(
        run_model_config(spec), Axis("vocab", vocab_size), key=jax.random.PRNGKey(spec.train.seed), init=spec.model.init
    )
    atomic_write_text(Path(untrained_csv), model_spectra(spec, untrained, time_oversampling).to_csv(index=False))
    return {"run_id": spec.run_id, "rows": len(table), "times": int(table["t"].nunique())}
