"""The paper's figures from the stages' tidy files only (seaborn; PNG + PDF through ``style.save_figure``).

Each ``*_figure`` function reads the contract files it is given, draws one figure and writes it to its
``FigureFiles`` (PNG and PDF).

Longer than 300 lines because it holds one short function per paper figure, which share the axes helpers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
import yaml
from matplotlib.ticker import FixedFormatter, FixedLocator, NullFormatter

from pipeline.analysis.tidy import FRONTIER_COLUMNS, LYAPUNOV_COLUMNS, SPECTRA_COLUMNS
from pipeline.config.families import DIFFEQ_FAMILIES, FAMILY_LABELS
from pipeline.report.style import FAMILY_COLOURS, FigureFiles, apply_style, panels, save_figure
from pipeline.report.tables import DATASET_LABELS, DOWNSTREAM_TABLES, downstream_table
from pipeline.report.tidy_inputs import (
    eval_curve,
    load_downstream,
    load_memory_probes,
    read_csv,
    read_json,
    require_columns,
)

PPL_LABEL = "validation perplexity (lower is better)"
STEP_LABEL = "training step (updates)"
TRAJECTORY_COLUMNS = ["magnitude", "degree", "step", "t", "token", "x0", "x1", "x2"]
CLUSTER_STATS_COLUMNS = ["magnitude", "degree", "n_clusters", "threshold", "mean_pairwise_distance"]
FINETUNE_COLUMNS = [
    "run_id",
    "family",
    "source_run",
    "source_dataset",
    "target_dataset",
    "method",
    "num_steps",
    "source_steps",
    "train_steps",
    "eval_split",
    "val_ppl",
    "initial_val_ppl",
]


def pretrain_curves(summaries: list[Path]) -> pd.DataFrame:
    """Validation curves of pretraining runs, one row per (run, eval step), with the run's spec columns
    (family label, dataset, size, ablation, Adam β2, D, shared time MLP) from its ``config.yaml``."""
    frames = []
    for path in summaries:
        summary = read_json(path)
        require_columns(
            summary,
            ["run_id", "family", "dataset", "size", "val_ppl", "mean_tokens_per_s"],
            path,
            "a summary written by pretrain",
        )
        spec = yaml.safe_load((Path(path).parent / "config.yaml").read_text())
        curve = eval_curve(path).assign(
            run_id=summary["run_id"],
            family=summary["family"],
            model=FAMILY_LABELS[summary["family"]],
            dataset=summary["dataset"],
            size=summary["size"],
            ablation=summary.get("ablation"),
            final_val_ppl=summary["val_ppl"],
            tokens_per_s=summary["mean_tokens_per_s"],
            beta2=spec["train"]["beta2"],
            time_embed_dim=spec["model"].get("time_embed_dim"),
            shared_time_mlp=bool(spec["model"].get("shared_time_mlp")),
        )
        frames.append(curve)
    return pd.concat(frames, ignore_index=True)


def _curve_axes(axes, title: str) -> None:
    axes.set(xlabel=STEP_LABEL, ylabel=PPL_LABEL, yscale="log", title=title)


def curves_figure(summaries: list[Path], out: FigureFiles) -> None:
    """Figs. 4 and 8: validation perplexity against training step for one dataset and size, one line per model."""
    apply_style()
    curves = pretrain_curves(summaries)
    figure, axes = panels(1, 1)
    sns.lineplot(curves, x="step", y="eval_ppl", hue="model", palette=FAMILY_COLOURS, marker="o", ax=axes[0, 0])
    dataset, size = curves["dataset"].iloc[0], curves["size"].iloc[0]
    _curve_axes(axes[0, 0], f"{DATASET_LABELS.get(dataset, dataset)}, {size}")
    save_figure(figure, out)


def beta2_figure(summaries: list[Path], out: FigureFiles) -> None:
    """Fig. 7: GPT and DiffEqFormer with Adam β2 = 0.95 and 0.999, one panel per model."""
    apply_style()
    curves = pretrain_curves(summaries).assign(beta2=lambda frame: frame["beta2"].map(lambda b: f"β2 = {b:g}"))
    models = list(dict.fromkeys(curves["model"]))
    figure, axes = panels(1, len(models), sharey=True)
    for axis, model in zip(axes[0], models, strict=True):
        sns.lineplot(curves[curves["model"] == model], x="step", y="eval_ppl", hue="beta2", marker="o", ax=axis)
        _curve_axes(axis, model)
    save_figure(figure, out)


def time_embed_dim_figures(summaries: list[Path], out_ppl: FigureFiles, out_throughput: FigureFiles) -> None:
    """Figs. 14-15: DiffEqFormer across the time-embedding dimension D against the GPT baseline of the same
    shape: validation curves and final perplexity (Fig. 14), training throughput (Fig. 15)."""
    apply_style()
    curves = pretrain_curves(summaries)
    diffeq = curves[curves["time_embed_dim"].notna()].assign(D=lambda frame: frame["time_embed_dim"].astype(int))
    baseline = curves[curves["time_embed_dim"].isna()]
    finals = diffeq.drop_duplicates("run_id").sort_values("D")
    baseline_final = baseline.drop_duplicates("run_id")

    figure, axes = panels(1, 2)
    sns.lineplot(diffeq, x="step", y="eval_ppl", hue="D", palette="viridis", marker="o", ax=axes[0, 0])
    sns.lineplot(
        baseline, x="step", y="eval_ppl", color="black", linestyle="--", label=baseline["model"].iloc[0], ax=axes[0, 0]
    )
    _curve_axes(axes[0, 0], "Validation curves")
    sns.lineplot(
        finals,
        x="D",
        y="final_val_ppl",
        marker="o",
        color=FAMILY_COLOURS["DiffEqFormer"],
        label="DiffEqFormer",
        ax=axes[0, 1],
    )
    axes[0, 1].axhline(
        baseline_final["final_val_ppl"].iloc[0], color="black", linestyle="--", label=baseline_final["model"].iloc[0]
    )
    axes[0, 1].set(xlabel="time-embedding dimension D", ylabel=PPL_LABEL, title="Final validation perplexity")
    axes[0, 1].legend()
    save_figure(figure, out_ppl)

    figure, axes = panels(1, 1)
    sns.barplot(finals, x="D", y="tokens_per_s", color=FAMILY_COLOURS["DiffEqFormer"], ax=axes[0, 0])
    axes[0, 0].axhline(
        baseline_final["tokens_per_s"].iloc[0], color="black", linestyle="--", label=baseline_final["model"].iloc[0]
    )
    axes[0, 0].set(
        xlabel="time-embedding dimension D", ylabel="training throughput (tokens/s)", title="Training throughput"
    )
    axes[0, 0].legend()
    save_figure(figure, out_throughput)


def memory_figure(records: list[Path], out: FigureFiles) -> None:
    """Fig. 16: peak memory of one training step of DiffEqFormer against the time-embedding dimension D, the
    baseline of the same shape dashed (left), and the growth of parameters and of peak memory relative to the
    smallest D (right): the paper's claim is that memory grows far less than the parameter count (App. D)."""
    apply_style()
    table, source = load_memory_probes(records)
    unit, scale = ("GiB", 2**30) if table["peak_bytes"].max() >= 2**30 else ("MiB", 2**20)
    table = table.assign(peak=table["peak_bytes"] / scale)
    diffeq = table[table["time_embed_dim"].notna()].assign(D=lambda frame: frame["time_embed_dim"].astype(int))
    diffeq = diffeq.sort_values("D").assign(D_label=lambda frame: frame["D"].astype(str))
    baseline = table[table["time_embed_dim"].isna()]
    first = diffeq.iloc[0]
    growth = pd.concat(
        [
            diffeq.assign(quantity="parameters", ratio=diffeq["parameters"] / first["parameters"]),
            diffeq.assign(quantity="peak memory", ratio=diffeq["peak_bytes"] / first["peak_bytes"]),
        ]
    )

    figure, axes = panels(1, 2)
    sns.barplot(diffeq, x="D_label", y="peak", color=FAMILY_COLOURS["DiffEqFormer"], ax=axes[0, 0])
    for _, row in baseline.iterrows():
        axes[0, 0].axhline(row["peak"], color="black", linestyle="--", label=FAMILY_LABELS[row["family"]])
    axes[0, 0].set(
        xlabel="time-embedding dimension D",
        ylabel=f"peak memory per device ({unit})",
        title="Peak memory of a train step",
    )
    if not baseline.empty:
        axes[0, 0].legend(loc="lower right")
    sns.lineplot(growth, x="D", y="ratio", hue="quantity", marker="o", ax=axes[0, 1])
    axes[0, 1].set(xlabel="time-embedding dimension D", ylabel=f"relative to D = {first['D']}", title="Growth with D")
    figure.suptitle(
        f"{source}; batch {first['batch_size']} × {first['seq_len']} tokens, "
        f"{first['num_devices']} {first['backend']} device(s)"
    )
    save_figure(figure, out)


def time_mlp_design_figure(summaries: list[Path], out: FigureFiles) -> None:
    """Fig. 18: the paper's design (only the sinusoid shared) against one MLP shared by all weights (App. D.2)."""
    apply_style()
    curves = pretrain_curves(summaries).assign(
        design=lambda frame: frame["shared_time_mlp"].map(
            {False: "sinusoid shared (paper)", True: "sinusoid + MLP shared"}
        )
    )
    figure, axes = panels(1, 1)
    sns.lineplot(curves, x="step", y="eval_ppl", hue="design", marker="o", ax=axes[0, 0])
    _curve_axes(axes[0, 0], "Time-dependent weight design")
    save_figure(figure, out)


def finetune_runs(summaries: list[Path]) -> pd.DataFrame:
    """Evaluation curves on the target dataset of the step-resampling fine-tunes (§6.2; split ``eval_split``), one
    row per (run, step), labelled 'DiffEqFormer L→N′' or 'GPT-L'."""
    frames = []
    for path in summaries:
        summary = read_json(path)
        require_columns(summary, FINETUNE_COLUMNS, path, "a fine-tune summary written by the finetune stage")
        label = (
            f"DiffEqFormer {summary['source_steps']}→{summary['num_steps']}"
            if summary["family"] in DIFFEQ_FAMILIES
            else f"{FAMILY_LABELS.get(summary['family'], summary['family'])}-{summary['num_steps']}"
        )
        frames.append(eval_curve(path).assign(**{column: summary[column] for column in FINETUNE_COLUMNS}, label=label))
    return pd.concat(frames, ignore_index=True)


def finetune_figure(summaries: list[Path], out: FigureFiles) -> None:
    """Fig. 5: perplexity on the target dataset's evaluation split (test where it has one,
    docs/paper.md#fine-tune-test-split) while fine-tuning, one panel per method and direction."""
    apply_style()
    runs = finetune_runs(summaries).sort_values(["family", "num_steps", "step"], ascending=[False, True, True])
    methods = list(dict.fromkeys(runs["method"]))
    directions = list(dict.fromkeys(zip(runs["source_dataset"], runs["target_dataset"], strict=True)))
    labels = list(dict.fromkeys(runs["label"]))
    resampled = list(dict.fromkeys(runs[runs["family"].isin(DIFFEQ_FAMILIES)]["label"]))
    palette = {label: (0.0, 0.0, 0.0) for label in labels} | dict(
        zip(resampled, sns.color_palette("crest", len(resampled)), strict=True)
    )
    figure, axes = panels(len(methods), len(directions), sharey="col")
    for row, method in enumerate(methods):
        for column, (source, target) in enumerate(directions):
            axis = axes[row, column]
            selected = runs[
                (runs["method"] == method) & (runs["source_dataset"] == source) & (runs["target_dataset"] == target)
            ]
            sns.lineplot(
                selected,
                x="step",
                y="eval_ppl",
                hue="label",
                hue_order=labels,
                palette=palette,
                marker="o",
                ax=axis,
                legend=row == 0 and column == 0,
            )
            _curve_axes(axis, f"{method}: {DATASET_LABELS.get(source, source)} → {DATASET_LABELS.get(target, target)}")
            split = "/".join(dict.fromkeys(selected["eval_split"]))
            axis.set(xlabel="fine-tuning step (updates)", ylabel=f"{split} perplexity (lower is better)")
    save_figure(figure, out)


def downstream_figures(paths: list[Path], outs: dict[int, FigureFiles]) -> None:
    """Figs. 9-12: accuracy per task with ±1 standard error bars, baseline against DiffEqFormer, one figure per
    shot count k, written to ``outs[k]``."""
    apply_style()
    table = downstream_table(load_downstream(paths))
    for k, out in outs.items():
        selected = table[table["shots"] == k]
        if selected.empty:
            raise ValueError(f"{paths[0]}: key 'shots' has no rows with {k} shots; expected {list(outs)}.")
        tasks = sorted(selected["task"].unique())
        models = list(dict.fromkeys(selected.sort_values("role")["model"]))
        figure, axes = panels(1, 1)
        axis = axes[0, 0]
        width = 0.8 / len(models)
        for offset, model in enumerate(models):
            rows = selected[selected["model"] == model].set_index("task").reindex(tasks)
            positions = np.arange(len(tasks)) + (offset - (len(models) - 1) / 2) * width
            axis.bar(
                positions,
                rows["acc"],
                width,
                yerr=rows["acc_stderr"],
                capsize=2,
                label=model,
                color=FAMILY_COLOURS[model],
            )
        pair = selected["pair"].iloc[0]
        axis.set_xticks(np.arange(len(tasks)), tasks, rotation=45, ha="right")
        axis.set(
            xlabel="task", ylabel="accuracy (%)", title=f"{DOWNSTREAM_TABLES.get(pair, pair).split(', ')[-1]}, {k}-shot"
        )
        axis.legend()
        save_figure(figure, out)


def spectra_figure(path: Path, out: FigureFiles) -> None:
    """Fig. 2a/b, App. E: real parts of the eigenvalues of every head's QK and OV matrices (and of the feed-forward
    W_fc W_proj when present) against depth time t (for a GPT, t = (layer+1)/L), coloured by head."""
    apply_style()
    spectra = read_csv(path, SPECTRA_COLUMNS, "the spectra written by the analysis stage")
    matrices = [matrix for matrix in ("QK", "OV", "FF") if matrix in set(spectra["matrix"])]
    figure, axes = panels(1, len(matrices))
    for axis, matrix in zip(axes[0], matrices, strict=True):
        sns.scatterplot(
            spectra[spectra["matrix"] == matrix],
            x="t",
            y="real",
            hue="head",
            palette="tab10",
            s=6,
            linewidth=0,
            alpha=0.7,
            ax=axis,
        )
        axis.set(xlabel="depth time t", ylabel="Re λ (eigenvalue, real part)", title=f"{matrix} spectrum")
    run = spectra["run_id"].iloc[0]
    figure.suptitle(
        f"{run} ({FAMILY_LABELS.get(spectra['family'].iloc[0], '')}, "
        f"{DATASET_LABELS.get(spectra['dataset'].iloc[0], '')})"
    )
    save_figure(figure, out)


def lyapunov_figure(path: Path, out: FigureFiles, output_token: int = -1) -> None:
    """Fig. 3, App. F: the largest Lyapunov exponent of the output token j's trajectory with respect to each input
    token, one heat-map row per sentence, tokens as labels. Token j itself (``output_token``, an index into the
    sentence) is greyed out and left out of the colour range: its self-sensitivity (~1/t) would wash out the
    others, as in the paper's figures."""
    apply_style()
    exponents = read_csv(path, LYAPUNOV_COLUMNS, "the Lyapunov exponents written by the analysis stage")
    largest = exponents[exponents["exponent_index"] == 0]
    sentences = sorted(largest["sentence_id"].unique())
    longest = largest.groupby("sentence_id")["position"].nunique().max()
    figure, axes = panels(len(sentences), 1)
    figure.set_size_inches(max(6.0, 0.45 * longest), 1.3 * len(sentences) + 0.6)
    for axis, sentence in zip(axes[:, 0], sentences, strict=True):
        rows = largest[largest["sentence_id"] == sentence].sort_values("position")
        is_output = np.zeros(len(rows), dtype=bool)
        is_output[output_token] = True
        labels = [
            f"{token}\n(output)" if output else token for token, output in zip(rows["token"], is_output, strict=True)
        ]
        axis.set_facecolor("lightgrey")
        sns.heatmap(
            rows[["exponent"]].T,
            mask=is_output[None, :],
            cmap="rocket_r",
            annot=False,
            cbar_kws={"label": "exponent (1/t)"},
            xticklabels=labels,
            yticklabels=False,
            ax=axis,
        )
        axis.set(xlabel="input token", ylabel=f"sentence {sentence}")
        axis.tick_params(axis="x", rotation=60)
    figure.suptitle(f"Lyapunov token sensitivity, {exponents['run_id'].iloc[0]}")
    save_figure(figure, out)


def clustering_figures(
    trajectories_path: Path, stats_path: Path, out_trajectories: FigureFiles, out_stats: FigureFiles
) -> None:
    """Fig. 2c/d and 13: token trajectories of the attention-only ODE for each magnitude function a(t) (3-D, the
    final positions marked), and the final cluster count and mean pairwise distance per magnitude, in the
    claim's regime (docs/experiments.md#analyses)."""
    apply_style()
    trajectories = read_csv(trajectories_path, TRAJECTORY_COLUMNS, "the trajectories written by the analysis stage")
    stats = read_csv(stats_path, CLUSTER_STATS_COLUMNS, "the clustering statistics written by the analysis stage")
    magnitudes = list(dict.fromkeys(trajectories.sort_values("degree")["magnitude"]))
    figure, axes = panels(1, len(magnitudes), subplot_kw={"projection": "3d"})
    for axis, magnitude in zip(axes[0], magnitudes, strict=True):
        rows = trajectories[trajectories["magnitude"] == magnitude].sort_values(["token", "step"])
        for _, path in rows.groupby("token"):
            axis.plot(path["x0"], path["x1"], path["x2"], linewidth=0.5, alpha=0.5)
        final = rows[rows["step"] == rows["step"].max()]
        axis.scatter(final["x0"], final["x1"], final["x2"], color="black", s=6)
        axis.set(xlabel="x₀", ylabel="x₁", zlabel="x₂", title=f"a(t): {magnitude}")
    save_figure(figure, out_trajectories)

    ordered = stats.sort_values("degree")
    figure, axes = panels(1, 2)
    sns.barplot(ordered, x="magnitude", y="n_clusters", color="C0", ax=axes[0, 0])
    axes[0, 0].set(xlabel="magnitude function a(t)", ylabel="final clusters (count)")
    sns.barplot(ordered, x="magnitude", y="mean_pairwise_distance", color="C1", ax=axes[0, 1])
    axes[0, 1].set(xlabel="magnitude function a(t)", ylabel="final mean pairwise distance")
    for axis in axes[0]:
        axis.tick_params(axis="x", rotation=30)
    save_figure(figure, out_stats)


def frontier_figure(paths: list[Path], out: FigureFiles) -> None:
    """Compute/quality frontier: validation perplexity of trained DiffEqFormers re-solved with other step counts
    and solvers, against vector-field evaluations per token."""
    apply_style()
    frontier = pd.concat(
        [read_csv(path, FRONTIER_COLUMNS, "the frontier written by the analysis stage") for path in paths],
        ignore_index=True,
    )
    figure, axes = panels(1, 1)
    figure.set_figwidth(figure.get_figwidth() * 1.5)
    sns.lineplot(
        frontier.sort_values("field_evaluations"),
        x="field_evaluations",
        y="val_ppl",
        hue="run_id",
        style="solver",
        markers=True,
        ax=axes[0, 0],
    )
    trained = frontier[frontier["step_factor"] == 1.0]
    axes[0, 0].scatter(
        trained["field_evaluations"],
        trained["val_ppl"],
        facecolors="none",
        edgecolors="black",
        s=80,
        label="as trained",
    )
    axes[0, 0].set(
        xscale="log",
        yscale="log",
        xlabel="vector-field evaluations per token (count)",
        ylabel=PPL_LABEL,
        title="Compute/quality frontier",
    )
    evaluations = sorted(frontier["field_evaluations"].unique())
    axes[0, 0].xaxis.set_major_locator(FixedLocator(evaluations))
    axes[0, 0].xaxis.set_major_formatter(FixedFormatter([f"{value:g}" for value in evaluations]))
    axes[0, 0].xaxis.set_minor_formatter(NullFormatter())
    axes[0, 0].legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.02, 1.0))
    save_figure(figure, out)
