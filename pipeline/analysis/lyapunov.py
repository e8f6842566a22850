"""Token sensitivity by Lyapunov exponents (paper §5.2, Eq. 7, App. B, Fig. 3, App. F).

Along the model's Euler trajectory x_k = x_{k-1} + dt·f(t_k, x_{k-1}) (dt = 1/L), the tangent matrices Q_i
(hidden×hidden) of output token j per input token i follow dQ_i/dt = J_ji Q_i, J_ji = ∂f_j/∂x_i of the whole field
(time-dependent LayerNorms included, final LayerNorm not). Each step Q_i ← QR(Q_i + dt·J_ji Q_i); the exponents
are Σ_k log|diag R_k| (T = 1), sorted decreasing. Under the causal mask f_j depends on x_0..x_j through query row j
only, so ``query_increment`` evaluates that row alone (``full_sequence_jacobian``: the reference way)."""

import html
import math
from pathlib import Path

import equinox as eqx
import haliax as hax
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from haliax import NamedArray
from levanter.layers.attention import AttentionMask

from pipeline.analysis.tidy import LYAPUNOV_COLUMNS


def query_increment(block, x: NamedArray) -> NamedArray:
    """The increment of the last token of ``x`` (positions 0..j) under one ``ParallelGptBlock``,
    step·(Attn(LN1 x)_j + FF(LN2 x_j)), re-associated so no key or value is formed (h = LN1 x, q^h = h_j W_Q^h +
    b_Q^h): score_i^h = (h_i·(W_K^h q^h) + b_K^h·q^h)/√d, Σ_i p_i^h v_i^h = (Σ_i p_i^h h_i) W_V^h + b_V^h. Its
    Jacobian per h_i costs O(heads·hidden) per output direction instead of O(hidden²)."""
    h = block.ln_1(x)
    weight, bias = block.attn.c_attn.weight, block.attn.c_attn.bias
    query = hax.dot(h["position", -1], weight["qkv", 0], axis="embed") + bias["qkv", 0]
    key_direction = hax.dot(weight["qkv", 1], query, axis="head_size")
    scores = hax.dot(h, key_direction, axis="embed") + hax.dot(bias["qkv", 1], query, axis="head_size")
    scores = scores / math.sqrt(query.resolve_axis("head_size").size)
    mixed = hax.dot(hax.nn.softmax(scores, axis="position"), h, axis="position")
    attended = hax.dot(mixed, weight["qkv", 2], axis="embed") + bias["qkv", 2]
    return (block.attn.c_proj(attended) + block.mlp(block.ln_2(x["position", -1]))) * block.step


def query_jacobian(block, x: NamedArray) -> jax.Array:
    """∂(increment of the last row)/∂x_i for every row i of ``x``: [positions, hidden_out, hidden_in]."""

    def last_row(array):
        return query_increment(block, NamedArray(array, x.axes)).array

    return jnp.moveaxis(jax.jacrev(last_row)(x.array), 1, 0)


def full_sequence_jacobian(block, x: NamedArray, output_position: int) -> jax.Array:
    """The same Jacobian by differentiating the whole sequence's increment under the causal mask (reference
    implementation), rows 0..``output_position``: [positions, hidden_out, hidden_in]."""

    def output_row(array):
        return block.increment(NamedArray(array, x.axes), AttentionMask.causal())["position", output_position].array

    jacobian = jnp.moveaxis(jax.jacrev(output_row)(x.array), 1, 0)
    return jacobian[: output_position + 1]


def euler_tangent_step(q: jax.Array, step_jacobian: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One Euler step of the tangent dynamics, Q ← QR(Q + dt·J Q), batched over leading axes; ``step_jacobian`` is
    dt·J. Returns the orthonormal factor and log|diag R|."""
    q, r = jnp.linalg.qr(q + step_jacobian @ q)
    return q, jnp.log(jnp.abs(jnp.diagonal(r, axis1=-2, axis2=-1)))


@jax.jit
def lyapunov_spectrum(step_jacobians: jax.Array, horizon: float) -> jax.Array:
    """Lyapunov exponents from the per-step Jacobians dt·J_k [steps, tokens, D, D] of a trajectory of length
    ``horizon``: (1/T)·Σ_k log|diag R_k| from Q_0 = I, per token and sorted in decreasing order [tokens, D]."""
    q0 = jnp.broadcast_to(jnp.eye(step_jacobians.shape[-1], dtype=step_jacobians.dtype), step_jacobians.shape[1:])
    _, log_r = jax.lax.scan(euler_tangent_step, q0, step_jacobians)
    return -jnp.sort(-log_r.sum(axis=0) / horizon, axis=-1)


@eqx.filter_jit
def trajectory_jacobians(model, input_ids: NamedArray) -> jax.Array:
    """dt·J_{j,i}(t_k, x_{k-1}) along the model's own Euler trajectory, j = the last token of ``input_ids``:
    [steps, positions, D, D]; the blocks of ``field.euler_blocks`` multiply their outputs by dt."""
    x = model.embeddings.embed(input_ids, pos_ids=hax.arange(input_ids.resolve_axis("position")), key=None)
    blocks = model.transformer.field.euler_blocks(model.config.num_layers)

    def step(x, block):
        return x + block.increment(x, AttentionMask.causal()), query_jacobian(block, x)

    _, jacobians = hax.scan(step, blocks.Block)(x, blocks.stacked)
    return jacobians


def token_exponents(model, token_ids: list[int]) -> np.ndarray:
    """Lyapunov spectra [len(token_ids), hidden] of the last token's dependence on each token (T = 1)."""
    Pos = hax.Axis("position", len(token_ids))
    jacobians = trajectory_jacobians(model, hax.named(jnp.asarray(token_ids, dtype=jnp.int32), Pos))
    return np.asarray(lyapunov_spectrum(jacobians, 1.0))


def sentence_tokens(tokenizer, sentence: str, output_token: int, seq_len: int) -> list[int]:
    """Token ids of ``sentence`` up to and including the output token (index ``output_token``, negative from
    the end), which must fall within the model's ``seq_len``."""
    ids = tokenizer(sentence, add_special_tokens=False)["input_ids"]
    position = output_token if output_token >= 0 else len(ids) + output_token
    if not 0 <= position < min(len(ids), seq_len):
        raise ValueError(
            f"analysis.lyapunov.output_token: {output_token} is outside the {len(ids)} tokens of "
            f"{sentence!r} (model seq_len {seq_len})."
        )
    return ids[: position + 1]


def exponents_table(run_id: str, sentence_id: int, tokens: list[str], exponents: np.ndarray) -> pd.DataFrame:
    """Tidy rows (``LYAPUNOV_COLUMNS``) of one sentence's spectra [tokens, hidden]."""
    positions, index = np.meshgrid(np.arange(exponents.shape[0]), np.arange(exponents.shape[1]), indexing="ij")
    return pd.DataFrame(
        {
            "run_id": run_id,
            "sentence_id": sentence_id,
            "position": positions.ravel(),
            "token": np.asarray(tokens, dtype=object)[positions.ravel()],
            "exponent_index": index.ravel(),
            "exponent": exponents.ravel(),
        }
    )[LYAPUNOV_COLUMNS]


def heatmap_html(run_id: str, sentences: list[tuple[list[str], np.ndarray]]) -> str:
    """An HTML page: each sentence's tokens shaded white → red by their largest exponent, min–max over the
    tokens before the output j (j's dependence on itself, much larger, would wash them out); j is outlined."""
    rows = []
    for sentence_id, (tokens, largest) in enumerate(sentences):
        context = largest[:-1] if len(largest) > 1 else largest
        low, high = float(context.min()), float(context.max())
        spans = []
        for position, (token, value) in enumerate(zip(tokens, largest, strict=True)):
            level = 0.0 if high == low else min(1.0, (value - low) / (high - low))
            shade = round(255 * (1.0 - level))
            outline = "outline: 2px solid black;" if position == len(tokens) - 1 else ""
            spans.append(
                f"<span title='{value:.4f}' style='background-color: rgb(255,{shade},{shade});"
                f"{outline}'>{html.escape(token)}</span>"
            )
        rows.append(f"<p><b>{sentence_id}</b> [{low:.3f}, {high:.3f}]: {''.join(spans)}</p>")
    return (
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>Lyapunov sensitivity: {html.escape(run_id)}"
        f"</title></head><body style='font-family: monospace'>\n<h3>{html.escape(run_id)}: largest Lyapunov "
        f"exponent of the last token w.r.t. each input token</h3>\n" + "\n".join(rows) + "\n</body></html>\n"
    )


def run_lyapunov(
    run_dir: str, tokenizer_dir: str, out_csv: str, out_html: str, sentences: list[str], output_token: int
) -> dict:
    """Exponents of every configured sentence for one trained DiffEqFormer: the CSV table and the heat-map."""
    from levanter.compat.hf_checkpoints import load_tokenizer

    from pipeline.artifacts import atomic_write_text
    from pipeline.models.checkpoint import load_diffeq_run

    tokenizer = load_tokenizer(tokenizer_dir)
    spec, model = load_diffeq_run(run_dir, len(tokenizer), "the Lyapunov analysis")
    frames, shaded = [], []
    for sentence_id, sentence in enumerate(sentences):
        ids = sentence_tokens(tokenizer, sentence, output_token, spec.model.seq_len)
        tokens = [tokenizer.decode([token]) for token in ids]
        exponents = token_exponents(model, ids)
        frames.append(exponents_table(spec.run_id, sentence_id, tokens, exponents))
        shaded.append((tokens, exponents[:, 0]))
    atomic_write_text(Path(out_csv), pd.concat(frames, ignore_index=True).to_csv(index=False))
    atomic_write_text(Path(out_html), heatmap_html(spec.run_id, shaded))
    return {"run_id": spec.run_id, "sentences": len(sentences)}
