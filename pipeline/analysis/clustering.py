"""Clustering of tokens in an attention-only ODE with time-scaled weights (paper §5.1, Fig. 2c/d, App. C.8, Fig. 13),
the authors' notebook dynamics (docs/paper.md#clustering-notebook, docs/experiments.md#analyses): n tokens
x0 ~ U(−r, r)^d, one head with one matrix A for query and key, A_0, V_0 ~ N(0, 1) scaled by a(t), N = int(T/dt) + 1
Euler updates at t_n = n·T/(N−1):

    z = LN(x)  (per-token standardisation, eps 1e-5),  x ← z + dt · softmax((z A_0 a)(z A_0 a)^T) (z V_0 a).

Magnitudes of degree k = 0..4 per regime: ``notebook`` a(t) = s·(t/T)^k; ``equal_mean`` s·(k+1)·(t/T)^k (the
constant's mean s over [0, T]); ``power`` s·t^k. The final state: single-linkage clusters at ``CLUSTER_THRESHOLD``
(and ``CLUSTER_CUTS``) and the mean pairwise distance."""

from pathlib import Path

import numpy as np
import pandas as pd

MAGNITUDE_DEGREES = {"constant": 0, "linear": 1, "quadratic": 2, "cubic": 3, "quartic": 4}
MAGNITUDE_FAMILIES = ("notebook", "equal_mean", "power")
ROLES = ("claim", "control", "sensitivity")
CLUSTER_THRESHOLD = 0.1
"""Single-linkage merge distance below which final tokens count as one cluster (states have unit variance per
token; the notebook judges clusters by eye, it has no criterion)."""
CLUSTER_CUTS = (CLUSTER_THRESHOLD, 0.05, 0.2)
"""The sweep's distance cuts: the claim's, then the sensitivity rows' (half and twice it)."""
CLUSTERED_MAX_FRACTION = 0.25
"""A final state "clusters" when it has at most this fraction of its tokens as clusters (10 of 40)."""


def time_grid(horizon: float, dt: float) -> np.ndarray:
    """The notebook's Euler times: N = int(T/dt) + 1 points from 0 to T inclusive, one update at each."""
    return np.linspace(0.0, horizon, int(horizon / dt) + 1)


def magnitude(family: str, name: str, t: np.ndarray, horizon: float, scale: float) -> np.ndarray:
    """a(t) of degree k = ``MAGNITUDE_DEGREES[name]``: s·(t/T)^k (notebook), s·(k+1)·(t/T)^k (equal_mean) or
    s·t^k (power)."""
    if name not in MAGNITUDE_DEGREES:
        raise ValueError(
            f"analysis.clustering.magnitudes: unknown {name!r}; expected one of {', '.join(MAGNITUDE_DEGREES)}."
        )
    degree = MAGNITUDE_DEGREES[name]
    if family == "notebook":
        return scale * (t / horizon) ** degree
    if family == "equal_mean":
        return scale * (degree + 1) * (t / horizon) ** degree
    if family == "power":
        return scale * t**degree
    raise ValueError(
        f"analysis.clustering.regimes: unknown magnitude {family!r}; expected one of {', '.join(MAGNITUDE_FAMILIES)}."
    )


def standardize(x: np.ndarray) -> np.ndarray:
    """Per-token standardisation over the last axis: (x − mean) / sqrt(var + 1e-5)."""
    centred = x - x.mean(axis=-1, keepdims=True)
    return centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + 1e-5)


def simulate(x0: np.ndarray, query_key: np.ndarray, value: np.ndarray, scales: np.ndarray, dt: float) -> np.ndarray:
    """Trajectory [len(scales) + 1, seeds, tokens, d] of x ← z + dt·softmax((zAa)(zAa)^T)(zVa), z = LN(x), from
    ``x0`` [seeds, tokens, d] with A, V [seeds, d, d] and a = ``scales`` [updates]."""
    states = [x0]
    x = x0
    for a in scales:
        z = standardize(x)
        projected = a * z @ query_key
        attention = projected @ projected.transpose(0, 2, 1)
        attention -= attention.max(axis=-1, keepdims=True)
        np.exp(attention, out=attention)
        attention /= attention.sum(axis=-1, keepdims=True)
        x = z + dt * attention @ (a * z @ value)
        states.append(x)
    return np.stack(states)


def cluster_counts(points: np.ndarray, cuts: tuple[float, ...]) -> list[int]:
    """Single-linkage clusters of ``points`` at each distance cut: 1 + the merges above the cut (single-linkage
    merge heights grow monotonically, so this is ``fcluster``'s "distance" criterion)."""
    from scipy.cluster.hierarchy import linkage

    heights = linkage(points, method="single")[:, 2]
    return [1 + int((heights > cut).sum()) for cut in cuts]


def cluster_statistics(points: np.ndarray, threshold: float = CLUSTER_THRESHOLD) -> dict[str, float]:
    """Clusters at single-linkage distance ``threshold``, and mean / max pairwise distance of ``points``."""
    from scipy.spatial.distance import pdist

    distances = pdist(points)
    return {
        "n_clusters": cluster_counts(points, (threshold,))[0],
        "threshold": threshold,
        "mean_pairwise_distance": float(distances.mean()),
        "max_pairwise_distance": float(distances.max()),
    }


def draw_initial(seeds: list[int], tokens: int, hidden_dim: int, x0_range: float) -> tuple[np.ndarray, ...]:
    """Per seed (numpy ``default_rng(seed)``): x0 ~ U(−r, r) [tokens, d], then A_0, V_0 ~ N(0, 1) [d, d]; stacked
    over seeds."""
    draws = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        x0 = rng.uniform(-x0_range, x0_range, size=(tokens, hidden_dim))
        draws.append((x0, *rng.standard_normal(size=(2, hidden_dim, hidden_dim))))
    return tuple(np.stack(part) for part in zip(*draws, strict=True))


def run_clustering(
    tokens: int, hidden_dim: int, x0_range: float, magnitudes: list[str], regime: dict, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The single picture: trajectories (magnitude, degree, step, t = step·dt, token, x0..x{d-1}) and final-state
    statistics of every magnitude in ``regime``, all from seed ``seed``'s x0, A_0 and V_0."""
    x0, query_key, value = draw_initial([seed], tokens, hidden_dim, x0_range)
    times = time_grid(regime["horizon"], regime["dt"])
    trajectories, statistics = [], []
    for name in magnitudes:
        scales = magnitude(regime["magnitude"], name, times, regime["horizon"], regime["scale"])
        states = simulate(x0, query_key, value, scales, regime["dt"])[:, 0]
        step, token = np.meshgrid(np.arange(len(states)), np.arange(tokens), indexing="ij")
        frame = pd.DataFrame(
            {
                "magnitude": name,
                "degree": MAGNITUDE_DEGREES[name],
                "step": step.ravel(),
                "t": step.ravel() * regime["dt"],
                "token": token.ravel(),
                **{f"x{dim}": states[..., dim].ravel() for dim in range(hidden_dim)},
            }
        )
        trajectories.append(frame)
        statistics.append({"magnitude": name, "degree": MAGNITUDE_DEGREES[name], **cluster_statistics(states[-1])})
    return pd.concat(trajectories, ignore_index=True), pd.DataFrame(statistics)


SWEEP_COLUMNS = ["regime", "role", "horizon", "dt", "seed", "magnitude", "degree", "tokens", "threshold", "n_clusters"]


def sweep_clustering(
    tokens: int, hidden_dim: int, x0_range: float, magnitudes: list[str], regimes: dict[str, dict], seeds: int
) -> pd.DataFrame:
    """Final-state clusters at each of ``CLUSTER_CUTS`` (``SWEEP_COLUMNS``) of every regime, seed (0..seeds−1) and
    magnitude; every regime and magnitude of one seed starts from the same x0, A_0 and V_0 (paired), all seeds
    integrated at once."""
    x0, query_key, value = draw_initial(list(range(seeds)), tokens, hidden_dim, x0_range)
    statistics: dict[bytes, list[list[int]]] = {}  # the same a(t_n) and dt (the constant across families) run once
    rows = []
    for label, regime in regimes.items():
        times = time_grid(regime["horizon"], regime["dt"])
        setting = (label, regime["role"], regime["horizon"], regime["dt"])
        for name in magnitudes:
            scales = magnitude(regime["magnitude"], name, times, regime["horizon"], regime["scale"])
            key = np.append(scales, regime["dt"]).tobytes()
            if key not in statistics:
                final = simulate(x0, query_key, value, scales, regime["dt"])[-1]
                statistics[key] = [cluster_counts(points, CLUSTER_CUTS) for points in final]
            rows += [
                (*setting, seed, name, MAGNITUDE_DEGREES[name], tokens, cut, count)
                for seed, counts in enumerate(statistics[key])
                for cut, count in zip(CLUSTER_CUTS, counts, strict=True)
            ]
    return pd.DataFrame(rows, columns=SWEEP_COLUMNS)


def seed_clusters(sweep: pd.DataFrame, regime: str, threshold: float = CLUSTER_THRESHOLD) -> pd.DataFrame:
    """Clusters of ``regime`` at distance cut ``threshold`` as a seed × magnitude table."""
    rows = sweep[(sweep["regime"] == regime) & np.isclose(sweep["threshold"], threshold)]
    if rows.empty:
        raise ValueError(
            f"clustering sweep: no rows for regime {regime!r} at cut {threshold:g}; regimes "
            f"{sorted(sweep['regime'].unique())}, cuts {sorted(sweep['threshold'].unique())}."
        )
    return rows.pivot(index="seed", columns="magnitude", values="n_clusters")


def clustered(sweep: pd.DataFrame, regime: str, magnitude_name: str, threshold: float) -> pd.Series:
    """Per seed of ``regime``: whether ``magnitude_name``'s final state clusters (at most ``CLUSTERED_MAX_FRACTION``
    of the tokens as clusters at cut ``threshold``)."""
    counts = seed_clusters(sweep, regime, threshold)[magnitude_name]
    return counts <= CLUSTERED_MAX_FRACTION * sweep.loc[sweep["regime"] == regime, "tokens"].iloc[0]


def degree_trend(sweep: pd.DataFrame, regime: str, threshold: float) -> pd.Series:
    """Per seed of ``regime``: Spearman ρ(degree k, final clusters) over the swept magnitudes, the Pearson
    correlation of their ranks (+1: clusters grow monotonically with k; NaN when the counts are all equal)."""
    table = seed_clusters(sweep, regime, threshold)
    ranks = table.rank(axis=1).to_numpy(dtype=float, copy=True)
    ranks -= ranks.mean(axis=1, keepdims=True)
    degrees = np.array([MAGNITUDE_DEGREES[name] for name in table.columns], dtype=float)
    degrees -= degrees.mean()
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = ranks @ degrees / np.sqrt((ranks**2).sum(axis=1) * (degrees**2).sum())
    return pd.Series(rho, index=table.index, name="rho")


def write_clustering(out_dir: str, settings: dict) -> dict:
    """Write ``trajectories.csv``, ``stats.csv`` (the single picture: the claim regime, seed ``seed``) and
    ``sweep.csv`` (every regime over ``seeds`` seeds) into ``out_dir`` (atomically, each)."""
    from pipeline.artifacts import atomic_write_text

    setup = {key: settings[key] for key in ("tokens", "hidden_dim", "x0_range", "magnitudes")}
    (regime,) = [regime for regime in settings["regimes"].values() if regime["role"] == "claim"]
    trajectories, statistics = run_clustering(**setup, regime=regime, seed=settings["seed"])
    sweep = sweep_clustering(**setup, regimes=settings["regimes"], seeds=settings["seeds"])
    atomic_write_text(Path(out_dir) / "trajectories.csv", trajectories.to_csv(index=False))
    atomic_write_text(Path(out_dir) / "stats.csv", statistics.to_csv(index=False))
    atomic_write_text(Path(out_dir) / "sweep.csv", sweep.to_csv(index=False))
    return statistics.to_dict(orient="records")
