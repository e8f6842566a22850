"""Clustering of tokens in an attention-only ODE with time-scaled weights (paper §5.1, Fig. 2c/d, App. C.8, Fig. 13).

One head, hidden size d, n tokens drawn uniformly from [-1, 1]^d. The weights W_Q, W_K, W_V ~ N(0, 1) are drawn
once at t = 0 and scaled by a magnitude a(t): constant a = 1 (weight sharing, Geshkovski et al.'s setting) or
a(t) = t^k, k = 1..4 (growing magnitudes, as the trained DiffEqFormer's spectra do). Euler on t ∈ [0, 1] with
``steps`` steps (dt = 1/steps; App. C.8 uses 200 layers):

    z = LN(x)  (per-token standardisation, no affine),  x ← z + dt · softmax((z W_Q a)(z W_K a)^T) (z W_V a)

(the normalised state carries the residual, as in the authors' simulation). The final state is summarised by
the number of single-linkage clusters at distance ``CLUSTER_THRESHOLD`` and the mean pairwise distance.

``sweep_clustering`` is the experiment behind the claim, with the authors' notebook dynamics
(docs/paper.md#clustering-notebook): one matrix A for query and key (symmetric QK), no 1/√d, x0 ~ U(−r, r),

    z = LN(x),  x ← z + dt · softmax((z A a)(z A a)^T) (z V a),  A, V ~ N(0, 1),

over horizons T (dt = T/steps) and seeds, with a(t) = t^k as is (``normalised`` False) or scaled to the constant's
mean over [0, T], a(t) = (k+1)(t/T)^k (``normalised`` True), so that "no clusters" cannot merely mean "weaker
dynamics".
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

MAGNITUDE_DEGREES = {"constant": 0, "linear": 1, "quadratic": 2, "cubic": 3, "quartic": 4}
CLUSTER_THRESHOLD = 0.1
"""Single-linkage merge distance below which final tokens count as one cluster (states have unit variance)."""
HORIZON = 1.0
"""The integration interval [0, 1] of DiffEqFormer's depth."""


def magnitude(name: str, t: np.ndarray) -> np.ndarray:
    """a(t): 1 for ``constant``, t^k for the polynomial of degree k."""
    if name not in MAGNITUDE_DEGREES:
        raise ValueError(f"analysis.clustering.magnitudes: unknown {name!r}; expected one of "
                         f"{', '.join(MAGNITUDE_DEGREES)}.")
    return np.ones_like(t) if name == "constant" else t ** MAGNITUDE_DEGREES[name]


def standardize(x: np.ndarray) -> np.ndarray:
    """Per-token LayerNorm without affine: zero mean, unit variance over the hidden axis (eps 1e-5)."""
    centred = x - x.mean(axis=-1, keepdims=True)
    return centred / np.sqrt((centred ** 2).mean(axis=-1, keepdims=True) + 1e-5)


def simulate(x0: np.ndarray, weights: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Euler trajectory [steps + 1, tokens, d] of the attention-only ODE from ``x0`` [tokens, d]; ``weights``
    [3, d, d] are W_Q, W_K, W_V at t = 0 and ``scales`` [steps] the magnitudes a(t_n), t_n = n·dt."""
    dt = HORIZON / len(scales)
    states = [x0]
    x = x0
    for a in scales:
        z = standardize(x)
        query, key, value = (a * z @ w for w in weights)
        scores = query @ key.T
        attention = np.exp(scores - scores.max(axis=-1, keepdims=True))
        attention /= attention.sum(axis=-1, keepdims=True)
        x = z + dt * attention @ value
        states.append(x)
    return np.stack(states)


def cluster_statistics(points: np.ndarray, threshold: float = CLUSTER_THRESHOLD) -> dict[str, float]:
    """Clusters at single-linkage distance ``threshold``, and mean / max pairwise distance of ``points``."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import pdist

    distances = pdist(points)
    labels = fcluster(linkage(points, method="single"), threshold, criterion="distance")
    return {"n_clusters": int(labels.max()), "threshold": threshold,
            "mean_pairwise_distance": float(distances.mean()), "max_pairwise_distance": float(distances.max())}


def run_clustering(tokens: int, hidden_dim: int, steps: int, magnitudes: list[str],
                   seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Trajectories (magnitude, degree, step, t, token, x0..x{d-1}) and final-state statistics of every
    magnitude, all from the same initial tokens and t = 0 weights (``seed``)."""
    rng = np.random.default_rng(seed)
    x0 = rng.uniform(-1.0, 1.0, size=(tokens, hidden_dim))
    weights = rng.standard_normal(size=(3, hidden_dim, hidden_dim))
    times = np.arange(steps + 1) * (HORIZON / steps)
    trajectories, statistics = [], []
    for name in magnitudes:
        states = simulate(x0, weights, magnitude(name, times[:-1]))
        step, token = np.meshgrid(np.arange(steps + 1), np.arange(tokens), indexing="ij")
        frame = pd.DataFrame({"magnitude": name, "degree": MAGNITUDE_DEGREES[name], "step": step.ravel(),
                              "t": times[step.ravel()], "token": token.ravel()})
        for dim in range(hidden_dim):
            frame[f"x{dim}"] = states[..., dim].ravel()
        trajectories.append(frame)
        statistics.append({"magnitude": name, "degree": MAGNITUDE_DEGREES[name], **cluster_statistics(states[-1])})
    return pd.concat(trajectories, ignore_index=True), pd.DataFrame(statistics)


def sweep_magnitude(name: str, t: np.ndarray, horizon: float, normalised: bool) -> np.ndarray:
    """a(t) on [0, T]: ``magnitude`` as is, or (k+1)(t/T)^k, whose mean over [0, T] is the constant's 1."""
    if not normalised:
        return magnitude(name, t)
    degree = MAGNITUDE_DEGREES[name]
    return (degree + 1) * magnitude(name, t / horizon)


def simulate_notebook(x0: np.ndarray, query_key: np.ndarray, value: np.ndarray, scales: np.ndarray,
                      horizon: float) -> np.ndarray:
    """Final state of the notebook's dynamics x ← z + dt·softmax((zAa)(zAa)^T)(zVa), z = LN(x), dt = T/steps."""
    dt = horizon / len(scales)
    x = x0
    for a in scales:
        z = standardize(x)
        projected = a * z @ query_key
        scores = projected @ projected.T
        attention = np.exp(scores - scores.max(axis=-1, keepdims=True))
        attention /= attention.sum(axis=-1, keepdims=True)
        x = z + dt * attention @ (a * z @ value)
    return x


SWEEP_COLUMNS = ["horizon", "normalised", "seed", "magnitude", "degree", "tokens", "n_clusters",
                 "mean_pairwise_distance"]


def sweep_clustering(tokens: int, hidden_dim: int, steps: int, magnitudes: list[str], horizons: list[float],
                     seeds: int, x0_range: float) -> pd.DataFrame:
    """Final-state cluster statistics (``SWEEP_COLUMNS``) of every horizon, seed (0..seeds−1), normalisation and
    magnitude; all magnitudes of one seed share x0, A and V."""
    rows = []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        x0 = rng.uniform(-x0_range, x0_range, size=(tokens, hidden_dim))
        query_key, value = rng.standard_normal(size=(2, hidden_dim, hidden_dim))
        for horizon in horizons:
            times = np.arange(steps) * (horizon / steps)
            for normalised in (True, False):
                for name in magnitudes:
                    final = simulate_notebook(x0, query_key, value, sweep_magnitude(name, times, horizon, normalised),
                                              horizon)
                    stats = cluster_statistics(final)
                    rows.append({"horizon": horizon, "normalised": normalised, "seed": seed, "magnitude": name,
                                 "degree": MAGNITUDE_DEGREES[name], "tokens": tokens,
                                 "n_clusters": stats["n_clusters"],
                                 "mean_pairwise_distance": stats["mean_pairwise_distance"]})
    return pd.DataFrame(rows, columns=SWEEP_COLUMNS)


def write_clustering(out_dir: str, settings: dict) -> dict:
    """Write ``trajectories.csv``, ``stats.csv`` (the single picture, seed ``seed``) and ``sweep.csv`` (the
    notebook-dynamics sweep of ``settings['sweep']``) into ``out_dir`` (atomically, each)."""
    from pipeline.artifacts import atomic_write_text

    shape = {key: settings[key] for key in ("tokens", "hidden_dim", "steps", "magnitudes")}
    trajectories, statistics = run_clustering(**shape, seed=settings["seed"])
    sweep = sweep_clustering(**shape, **settings["sweep"])
    atomic_write_text(Path(out_dir) / "trajectories.csv", trajectories.to_csv(index=False))
    atomic_write_text(Path(out_dir) / "stats.csv", statistics.to_csv(index=False))
    atomic_write_text(Path(out_dir) / "sweep.csv", sweep.to_csv(index=False))
    return statistics.to_dict(orient="records")
