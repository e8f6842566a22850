"""Small synthetic files in the stages' output contracts (brief: "Output contracts"), for the report's tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from pipeline.analysis.clustering import MAGNITUDE_DEGREES, SWEEP_COLUMNS
from pipeline.analysis.tidy import FRONTIER_COLUMNS, LYAPUNOV_COLUMNS, PARAM_COUNT_COLUMNS, SPECTRA_COLUMNS
from pipeline.config import memory_probes
from pipeline.evaluate import DOWNSTREAM_COLUMNS
from pipeline.report.figures import CLUSTER_STATS_COLUMNS, TRAJECTORY_COLUMNS
from pipeline.report.style import FigureFiles
from pipeline.report.table_views import TableFiles


def table_files(stem: Path, *, tex: bool = True) -> TableFiles:
    """A table's files named ``stem`` + .md/.csv/.html (and .tex)."""
    return TableFiles(
        md=Path(f"{stem}.md"),
        csv=Path(f"{stem}.csv"),
        html=Path(f"{stem}.html"),
        tex=Path(f"{stem}.tex") if tex else None,
    )


def figure_files(stem: Path) -> FigureFiles:
    return FigureFiles(png=Path(f"{stem}.png"), pdf=Path(f"{stem}.pdf"))


def write_csv(path: Path, rows: list, columns: list[str]) -> Path:
    """``rows`` under ``columns`` as the CSV ``path``, its folder made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=columns).to_csv(path, index=False)
    return path


Accuracy = dict[tuple[str, int], float]
"""An accuracy (a fraction) per (task, shots)."""
SIZES = {"small": (48, 4), "medium": (64, 6), "large": (80, 8), "llama1b": (64, 4), "ft18": (48, 6), "ft24": (48, 8)}


def write_curve(folder: Path, final_ppl: float, steps: int = 40, flat_tail: int = 0) -> None:
    """A metrics.jsonl whose evaluation perplexity falls from 2000 to ``final_ppl`` (3 evaluations), then stays at
    ``final_ppl`` for ``flat_tail`` more evaluations (a plateau)."""
    records = [
        {"step": s, "loss": 7.0 - s / steps, "lr": 1e-3, "tokens_per_s": 1e3, "step_s": 0.1}
        for s in range(steps + flat_tail)
    ]
    for step, ppl in (
        (0, 2000.0),
        (steps // 2, (2000.0 + final_ppl) / 3),
        (steps - 1, final_ppl),
        *((steps + k, final_ppl) for k in range(flat_tail)),
    ):
        records.append({"step": step, "eval_loss": float(np.log(ppl)), "eval_ppl": ppl})
    (folder / "metrics.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))


def write_pretrain_run(
    results: Path,
    run_id: str,
    *,
    ppl: float,
    family: str | None = None,
    group: str | None = None,
    size: str | None = None,
    ablation: str | None = None,
    role: str | None = None,
    parameters: int = 200_000,
    tokens_per_s: float = 5000.0,
    beta2: float = 0.999,
    time_embed_dim: int | None = None,
    shared_time_mlp: bool = False,
    seed: int = 0,
) -> Path:
    """A pretraining run's config.yaml, metrics.jsonl and summary.json. Unless given, its group, size and family are
    read from ``run_id`` (``<dataset>-<size>[-<ablation>]-<family>``) and its role is "ablation" for an ``ablation``,
    else "table"."""
    group = group or "-".join(run_id.split("-")[:2])
    size, family = size or group.split("-")[1], family or run_id.rsplit("-", 1)[1]
    role = role or ("ablation" if ablation else "table")
    dataset = group.split("-", 1)[0]
    hidden, layers = SIZES[size]
    folder = results / "runs" / run_id
    folder.mkdir(parents=True, exist_ok=True)
    diffeq = family.startswith("diffeq")
    identity = {"run_id": run_id, "preset": "tiny", "group": group, "dataset": dataset, "size": size, "role": role}
    spec = {
        **identity,
        "tokenizer": "bpe",
        "ablation": ablation,
        "model": {
            "family": family,
            "hidden_dim": hidden,
            "num_heads": 4,
            "num_layers": layers,
            "seq_len": 64,
            "intermediate_dim": 176 if "llama" in family else None,
            "time_embed_dim": (time_embed_dim or 8) if diffeq else None,
            "sinusoidal_dim": 16 if diffeq else None,
            "shared_time_mlp": shared_time_mlp if diffeq else None,
        },
        "train": {"batch_size": 8, "steps": 40, "lr": 2e-3, "beta2": beta2},
    }
    (folder / "config.yaml").write_text(yaml.safe_dump(spec))
    write_curve(folder, ppl)
    summary = {
        **identity,
        "family": family,
        "ablation": ablation,
        "seed": seed,
        "parameters": parameters,
        "train_steps": 40,
        "tokens_seen": 20480,
        "final_train_loss": 6.0,
        "val_loss": float(np.log(ppl)),
        "val_ppl": ppl,
        "val_bpb": 3.0,
        "mean_tokens_per_s": tokens_per_s,
        "resumed_from_step": 0,
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder / "summary.json"


def write_finetune_run(
    results: Path,
    run_id: str,
    *,
    family: str,
    num_steps: int,
    ppl: float,
    source: str = "owt",
    target: str = "wt103",
    method: str = "lora",
    source_steps: int = 4,
    seed: int = 0,
    flat_tail: int = 0,
) -> Path:
    folder = results / "runs" / run_id
    folder.mkdir(parents=True, exist_ok=True)
    write_curve(folder, ppl, steps=30, flat_tail=flat_tail)
    summary = {
        "run_id": run_id,
        "preset": "tiny",
        "role": "finetune",
        "family": family,
        "source_run": "src",
        "source_dataset": source,
        "target_dataset": target,
        "method": method,
        "num_steps": num_steps,
        "source_steps": source_steps,
        "train_steps": 30,
        "seed": seed,
        "parameters": 1000,
        "trainable_parameters": 100,
        "trainable_fraction": 0.1,
        "initial_val_loss": 7.6,
        "initial_val_ppl": 2000.0,
        "eval_split": "test" if target == "wt103" else "validation",
        "val_loss": float(np.log(ppl)),
        "val_ppl": ppl,
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder / "summary.json"


def write_finetunes(
    results: Path, directions: list[tuple[str, str]], methods: list[str], diffeq: int, steps_grid: list[int], gpt: int
) -> list[Path]:
    """Fig. 5's fine-tunes per direction and method: the DiffEqFormer of ``diffeq`` steps resampled to each N′ of
    ``steps_grid`` (perplexity 500 + N′) and the GPT of ``gpt`` layers (perplexity 550)."""
    tunes = [
        (f"diffeq{diffeq}-n{n}", dict(family="diffeq", num_steps=n, source_steps=diffeq, ppl=500.0 + n))
        for n in steps_grid
    ]
    tunes.append((f"gpt{gpt}", dict(family="gpt", num_steps=gpt, source_steps=gpt, ppl=550.0)))
    return [
        write_finetune_run(
            results, f"ft-{source}-{target}-{name}-{method}", source=source, target=target, method=method, **tune
        )
        for name, tune in tunes
        for source, target in directions
        for method in methods
    ]


def write_downstream(
    results: Path, run_id: str, *, family: str, accuracy: Accuracy, pair: str = "gpt-large", n_samples: int = 100
) -> Path:
    """downstream.csv with one 'acc' row (fraction) per (task, shots) plus a perplexity row per task."""
    rows = []
    for (task, shots), acc in accuracy.items():
        stderr = float(np.sqrt(acc * (1 - acc) / n_samples))
        rows.append([run_id, family, pair, task, shots, "acc", acc, stderr, n_samples])
        rows.append([run_id, family, pair, task, shots, "perplexity", 123.0, 4.0, n_samples])
    return write_csv(results / "downstream" / run_id / "downstream.csv", rows, DOWNSTREAM_COLUMNS)


def write_spectra(
    results: Path, run_id: str, *, family: str, growth: float, folder: str = "spectra", seed: int = 0
) -> Path:
    """Eigenvalues (random draws of ``seed``; 6 layers, 2 heads, rank 4) whose magnitude scales as 1 + growth·t
    (growth 0: flat, random ordering), in ``analysis/<folder>/`` (``spectra_untrained``: the untrained control); the
    dataset is ``run_id``'s first part."""
    rng = np.random.default_rng(seed)
    dataset, layers, heads, rank = run_id.split("-")[0], 6, 2, 4
    rows = []
    for matrix in ("QK", "OV"):
        for layer in range(layers):
            t = (layer + 1) / layers
            for head in range(heads):
                values = rng.normal(size=rank) + 1j * rng.normal(size=rank)
                scale = 1 + growth * t if growth else rng.uniform(0.5, 1.5)
                for index, value in enumerate(values * scale):
                    rows.append([run_id, family, dataset, matrix, t, layer, head, index, value.real, value.imag])
    return write_csv(results / "analysis" / folder / f"{run_id}.csv", rows, SPECTRA_COLUMNS)


def write_lyapunov(results: Path, run_id: str) -> Path:
    rng = np.random.default_rng(1)
    rows = [
        [run_id, sentence, position, f"tok{position}", k, float(rng.normal()) - k]
        for sentence in range(2)
        for position in range(8)
        for k in range(2)
    ]
    path = write_csv(results / "analysis" / "lyapunov" / f"{run_id}.csv", rows, LYAPUNOV_COLUMNS)
    path.with_suffix(".html").write_text("<html><body>heat-map</body></html>")
    return path


def write_clustering(results: Path, *, clusters: dict[str, int] | None = None) -> tuple[Path, Path]:
    """Trajectories of 5 tokens over 4 steps per magnitude; stats with ``clusters`` (default: constant clusters,
    polynomials do not) and a dispersion growing with the degree."""
    clusters = clusters or {"constant": 2, "linear": 3, "quadratic": 5, "cubic": 5, "quartic": 5}
    rng = np.random.default_rng(2)
    trajectories, stats = [], []
    for magnitude, degree in MAGNITUDE_DEGREES.items():
        for token in range(5):
            start = rng.uniform(-1, 1, size=3)
            for step in range(4):
                x = start * (1 + 0.2 * degree * step)
                trajectories.append([magnitude, degree, step, step / 3, token, *x])
        stats.append([magnitude, degree, clusters[magnitude], 0.1, 0.5 + degree])
    folder = results / "analysis" / "clustering"
    write_csv(folder / "trajectories.csv", trajectories, TRAJECTORY_COLUMNS)
    write_csv(folder / "stats.csv", stats, CLUSTER_STATS_COLUMNS)
    regimes = {
        "authors": ("claim", 20.0, 0.1),
        "equal-mean": ("control", 20.0, 0.1),
        "T1-unnormalised": ("sensitivity", 1.0, 0.005),
    }
    sweep = [
        (regime, role, horizon, dt, seed, magnitude, degree, 40, cut, clusters[magnitude] * 4)
        for regime, (role, horizon, dt) in regimes.items()
        for seed in range(3)
        for magnitude, degree in MAGNITUDE_DEGREES.items()
        for cut in (0.1, 0.05, 0.2)
    ]
    write_csv(folder / "sweep.csv", sweep, SWEEP_COLUMNS)
    return folder / "trajectories.csv", folder / "stats.csv"


def write_frontier(results: Path, run_id: str, *, dataset: str = "owt", trained_steps: int = 6) -> Path:
    rows = []
    for solver, evaluations_per_step in (("euler", 1), ("heun", 2)):
        for factor in (0.5, 1.0, 2.0):
            steps = int(trained_steps * factor)
            loss = 6.0 + 1 / steps
            evaluations = steps * evaluations_per_step
            rows.append(
                [run_id, "diffeq", dataset, trained_steps, solver, steps, factor, evaluations, loss, np.exp(loss)]
            )
    return write_csv(results / "analysis" / "frontier" / f"{run_id}.csv", rows, FRONTIER_COLUMNS)


def write_param_counts(results: Path) -> Path:
    rows = [["GPT-large", None, 790_000]] + [["DiffEqFormer-large", d, 600_000 + 50_000 * d] for d in (4, 8, 16)]
    return write_csv(results / "analysis" / "param_counts.csv", rows, PARAM_COUNT_COLUMNS)


def write_memory_record(
    results: Path,
    probe_id: str,
    *,
    family: str,
    time_embed_dim: int | None,
    parameters: int,
    peak_bytes: int,
    device_peak: bool = False,
) -> Path:
    """A memory-probe record; ``device_peak``: as on a GPU (allocator peak measured), else as on CPU."""
    record = {
        "probe_id": probe_id,
        "family": family,
        "time_embed_dim": time_embed_dim,
        "batch_size": 8,
        "seq_len": 64,
        "parameters": parameters,
        "num_devices": 1,
        "backend": "gpu" if device_peak else "cpu",
        "device_peak_bytes": peak_bytes if device_peak else None,
        "compiled_peak_bytes": peak_bytes if not device_peak else peak_bytes - 2**20,
        "host_peak_rss_bytes": 2**30,
    }
    path = results / "analysis" / "memory" / f"{probe_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return path


def populate_preset(results: Path, config: dict, runs: dict) -> None:
    """Every file the report stage reads for ``config`` (a resolved preset) and its pretraining ``runs``
    ({run_id: RunSpec}), with synthetic numbers: DiffEqFormer slightly better than its baseline."""
    for run_id, spec in runs.items():
        better = 0.95 if spec.model.family.startswith("diffeq") else 1.0
        write_pretrain_run(
            results,
            run_id,
            group=spec.group,
            size=spec.size,
            family=spec.model.family,
            ppl=600.0 * better,
            role=spec.role,
            ablation=spec.ablation,
            beta2=spec.train.beta2,
            time_embed_dim=spec.model.time_embed_dim,
            shared_time_mlp=bool(spec.model.shared_time_mlp),
        )
    finetune = config["finetune"]
    for source, target in finetune["directions"]:
        diffeq, gpt = (
            config["sizes"][config["pretrain"][f"{source}-{finetune[role]}"]["size"]]["num_layers"]
            for role in ("diffeq_source", "baseline_source")
        )
        write_finetunes(results, [(source, target)], finetune["methods"], diffeq, finetune["steps_grid"], gpt)
    downstream = config["downstream"]
    for pair, run_ids in downstream["pairs"].items():
        for run_id in run_ids:
            family = runs[run_id].model.family
            accuracy = {
                (task, shots): 0.3 + 0.02 * family.startswith("diffeq")
                for task in downstream["tasks"]
                for shots in downstream["shots"]
            }
            write_downstream(results, run_id, family=family, pair=pair, accuracy=accuracy)
    analysis = config["analysis"]
    for run_id in analysis["spectra"]["runs"]:
        spec = runs[run_id]
        growth = 2.0 if spec.model.family.startswith("diffeq") else 0.0
        write_spectra(results, run_id, family=spec.model.family, growth=growth)
        write_spectra(results, run_id, family=spec.model.family, growth=0.0, folder="spectra_untrained")
    for run_id in analysis["lyapunov"]["runs"]:
        write_lyapunov(results, run_id)
    for run_id in analysis["frontier"]["runs"]:
        write_frontier(results, run_id, dataset=runs[run_id].dataset)
    write_clustering(results)
    write_param_counts(results)
    for probe_id, spec in memory_probes(config).items():
        d = spec.model.time_embed_dim
        write_memory_record(
            results,
            probe_id,
            family=spec.model.family,
            time_embed_dim=d,
            parameters=400_000 + 50_000 * (d or 0),
            peak_bytes=30 * 2**20 + 2**18 * (d or 0),
        )
