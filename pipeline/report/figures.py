"""The paper's figures from the stages' tidy files only (read by ``tidy_inputs``): each ``*_figure`` draws one figure to
its ``FigureFiles`` (PNG + PDF)."""

from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FixedFormatter, FixedLocator, NullFormatter

from pipeline.analysis.tidy import FRONTIER_COLUMNS, LYAPUNOV_COLUMNS, SPECTRA_COLUMNS
from pipeline.config.families import DIFFEQ_FAMILIES, FAMILY_LABELS
from pipeline.report.style import FAMILY_COLOURS, FigureFiles, house_figure
from pipeline.report.tables import DATASET_LABELS, DOWNSTREAM_TABLES, downstream_table
from pipeline.report.tidy_inputs import finetune_runs, load_downstream, load_memory_probes, pretrain_curves, read_csv

PPL_LABEL = "validation perplexity (lower is better)"
D_LABEL = "time-embedding dimension D"
TRAJECTORY_COLUMNS = ["magnitude", "degree", "step", "t", "token", "x0", "x1", "x2"]
CLUSTER_STATS_COLUMNS = ["magnitude", "degree", "n_clusters", "threshold", "mean_pairwise_distance"]


def _curves(axis, curves: pd.DataFrame, title: str, **kwargs) -> None:
    """Validation perplexity (log scale) against training step, one line per ``hue``."""
    sns.lineplot(curves, x="step", y="eval_ppl", marker="o", ax=axis, **kwargs)
    axis.set(xlabel="training step (updates)", ylabel=PPL_LABEL, yscale="log", title=title)


def _baseline(axis, value: float, label: str) -> None:
    """The baseline's value as a dashed black line."""
    axis.axhline(value, color="black", linestyle="--", label=label)


def curves_figure(summaries: list[Path], out: FigureFiles) -> None:
    """Figs. 4 and 8: validation perplexity against training step for one dataset and size, one line per model."""
    curves = pretrain_curves(summaries)
    dataset, size = curves["dataset"].iloc[0], curves["size"].iloc[0]
    with house_figure(out) as (figure, axes):
        _curves(
            axes[0, 0], curves, f"{DATASET_LABELS.get(dataset, dataset)}, {size}", hue="model", palette=FAMILY_COLOURS
        )


def beta2_figure(summaries: list[Path], out: FigureFiles) -> None:
    """Fig. 7: GPT and DiffEqFormer with Adam β2 = 0.95 and 0.999, one panel per model."""
    curves = pretrain_curves(summaries).assign(beta2=lambda frame: frame["beta2"].map(lambda b: f"β2 = {b:g}"))
    models = list(dict.fromkeys(curves["model"]))
    with house_figure(out, 1, len(models), sharey=True) as (figure, axes):
        for axis, model in zip(axes[0], models, strict=True):
            _curves(axis, curves[curves["model"] == model], model, hue="beta2")


def time_embed_dim_figures(summaries: list[Path], out_ppl: FigureFiles, out_throughput: FigureFiles) -> None:
    """Figs. 14-15: DiffEqFormer across the time-embedding dimension D against the GPT baseline of the same
    shape: validation curves and final perplexity (Fig. 14), training throughput (Fig. 15)."""
    curves = pretrain_curves(summaries)
    diffeq = curves[curves["time_embed_dim"].notna()].assign(D=lambda frame: frame["time_embed_dim"].astype(int))
    baseline = curves[curves["time_embed_dim"].isna()]
    finals = diffeq.drop_duplicates("run_id").sort_values("D")
    baseline_final, baseline_label = baseline.drop_duplicates("run_id"), baseline["model"].iloc[0]
    colour = FAMILY_COLOURS["DiffEqFormer"]

    with house_figure(out_ppl, 1, 2) as (figure, axes):
        _curves(axes[0, 0], diffeq, "Validation curves", hue="D", palette="viridis")
        sns.lineplot(
            baseline, x="step", y="eval_ppl", color="black", linestyle="--", label=baseline_label, ax=axes[0, 0]
        )
        sns.lineplot(finals, x="D", y="final_val_ppl", marker="o", color=colour, label="DiffEqFormer", ax=axes[0, 1])
        _baseline(axes[0, 1], baseline_final["final_val_ppl"].iloc[0], baseline_label)
        axes[0, 1].set(xlabel=D_LABEL, ylabel=PPL_LABEL, title="Final validation perplexity")
        axes[0, 1].legend()

    with house_figure(out_throughput) as (figure, axes):
        sns.barplot(finals, x="D", y="tokens_per_s", color=colour, ax=axes[0, 0])
        _baseline(axes[0, 0], baseline_final["tokens_per_s"].iloc[0], baseline_label)
        axes[0, 0].set(xlabel=D_LABEL, ylabel="training throughput (tokens/s)", title="Training throughput")
        axes[0, 0].legend()


def memory_figure(records: list[Path], out: FigureFiles) -> None:
    """Fig. 16 (App. D): peak train-step memory of DiffEqFormer against D, the same-shape baseline dashed (left), and
    parameter and peak-memory growth relative to the smallest D (right)."""
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

    with house_figure(out, 1, 2) as (figure, axes):
        sns.barplot(diffeq, x="D_label", y="peak", color=FAMILY_COLOURS["DiffEqFormer"], ax=axes[0, 0])
        for _, row in baseline.iterrows():
            _baseline(axes[0, 0], row["peak"], FAMILY_LABELS[row["family"]])
        axes[0, 0].set(xlabel=D_LABEL, ylabel=f"peak memory per device ({unit})", title="Peak memory of a train step")
        if not baseline.empty:
            axes[0, 0].legend(loc="lower right")
        sns.lineplot(growth, x="D", y="ratio", hue="quantity", marker="o", ax=axes[0, 1])
        axes[0, 1].set(xlabel=D_LABEL, ylabel=f"relative to D = {first['D']}", title="Growth with D")
        figure.suptitle(
            f"{source}; batch {first['batch_size']} × {first['seq_len']} tokens, "
            f"{first['num_devices']} {first['backend']} device(s)"
        )


def time_mlp_design_figure(summaries: list[Path], out: FigureFiles) -> None:
    """Fig. 18: the paper's design (only the sinusoid shared) against one MLP shared by all weights (App. D.2)."""
    designs = {False: "sinusoid shared (paper)", True: "sinusoid + MLP shared"}
    curves = pretrain_curves(summaries).assign(design=lambda frame: frame["shared_time_mlp"].map(designs))
    with house_figure(out) as (figure, axes):
        _curves(axes[0, 0], curves, "Time-dependent weight design", hue="design")


def finetune_figure(summaries: list[Path], out: FigureFiles) -> None:
    """Fig. 5: perplexity on the target dataset's evaluation split (test where it has one,
    docs/paper.md#fine-tune-test-split) while fine-tuning, one panel per method and direction."""
    runs = finetune_runs(summaries).sort_values(["family", "num_steps", "step"], ascending=[False, True, True])
    methods = list(dict.fromkeys(runs["method"]))
    directions = list(dict.fromkeys(zip(runs["source_dataset"], runs["target_dataset"], strict=True)))
    labels = list(dict.fromkeys(runs["label"]))
    resampled = list(dict.fromkeys(runs[runs["family"].isin(DIFFEQ_FAMILIES)]["label"]))
    palette = {label: (0.0, 0.0, 0.0) for label in labels} | dict(
        zip(resampled, sns.color_palette("crest", len(resampled)), strict=True)
    )
    with house_figure(out, len(methods), len(directions), sharey="col") as (figure, axes):
        for row, method in enumerate(methods):
            for column, (source, target) in enumerate(directions):
                axis = axes[row, column]
                selected = runs[
                    (runs["method"] == method) & (runs["source_dataset"] == source) & (runs["target_dataset"] == target)
                ]
                title = f"{method}: {DATASET_LABELS.get(source, source)} → {DATASET_LABELS.get(target, target)}"
                legend = row == 0 and column == 0
                _curves(axis, selected, title, hue="label", hue_order=labels, palette=palette, legend=legend)
                split = "/".join(dict.fromkeys(selected["eval_split"]))
                axis.set(xlabel="fine-tuning step (updates)", ylabel=f"{split} perplexity (lower is better)")


def downstream_figures(paths: list[Path], outs: dict[int, FigureFiles]) -> None:
    """Figs. 9-12: accuracy per task with ±1 standard error bars, baseline against DiffEqFormer, one figure per
    shot count k, written to ``outs[k]``."""
    table = downstream_table(load_downstream(paths))
    for k, out in outs.items():
        selected = table[table["shots"] == k]
        if selected.empty:
            raise ValueError(f"{paths[0]}: key 'shots' has no rows with {k} shots; expected {list(outs)}.")
        tasks = sorted(selected["task"].unique())
        models = list(dict.fromkeys(selected.sort_values("role")["model"]))
        width = 0.8 / len(models)
        pair = selected["pair"].iloc[0]
        title = f"{DOWNSTREAM_TABLES.get(pair, pair).split(', ')[-1]}, {k}-shot"
        with house_figure(out) as (figure, axes):
            for offset, model in enumerate(models):
                rows = selected[selected["model"] == model].set_index("task").reindex(tasks)
                positions = np.arange(len(tasks)) + (offset - (len(models) - 1) / 2) * width
                error, colour = rows["acc_stderr"], FAMILY_COLOURS[model]
                axes[0, 0].bar(positions, rows["acc"], width, yerr=error, capsize=2, label=model, color=colour)
            axes[0, 0].set_xticks(np.arange(len(tasks)), tasks, rotation=45, ha="right")
            axes[0, 0].set(xlabel="task", ylabel="accuracy (%)", title=title)
            axes[0, 0].legend()


def spectra_figure(path: Path, out: FigureFiles) -> None:
    """Fig. 2a/b, App. E: real parts of the eigenvalues of every head's QK and OV matrices (and of the feed-forward
    W_fc W_proj when present) against depth time t (for a GPT, t = (layer+1)/L), coloured by head."""
    spectra = read_csv(path, SPECTRA_COLUMNS, "the spectra written by the analysis stage")
    matrices = [matrix for matrix in ("QK", "OV", "FF") if matrix in set(spectra["matrix"])]
    family, dataset = spectra["family"].iloc[0], spectra["dataset"].iloc[0]
    with house_figure(out, 1, len(matrices)) as (figure, axes):
        for axis, matrix in zip(axes[0], matrices, strict=True):
            points = spectra[spectra["matrix"] == matrix]
            sns.scatterplot(points, x="t", y="real", hue="head", palette="tab10", s=6, linewidth=0, alpha=0.7, ax=axis)
            axis.set(xlabel="depth time t", ylabel="Re λ (eigenvalue, real part)", title=f"{matrix} spectrum")
        figure.suptitle(
            f"{spectra['run_id'].iloc[0]} ({FAMILY_LABELS.get(family, '')}, {DATASET_LABELS.get(dataset, '')})"
        )


def lyapunov_figure(path: Path, out: FigureFiles, output_token: int = -1) -> None:
    """Fig. 3, App. F: the largest Lyapunov exponent of output token j's trajectory per input token, one heat-map
    row per sentence; token j itself is greyed out of the colour range (its ~1/t self-sensitivity would wash out the
    rest), as in the paper."""
    exponents = read_csv(path, LYAPUNOV_COLUMNS, "the Lyapunov exponents written by the analysis stage")
    largest = exponents[exponents["exponent_index"] == 0]
    sentences = sorted(largest["sentence_id"].unique())
    longest = largest.groupby("sentence_id")["position"].nunique().max()
    with house_figure(out, len(sentences), 1) as (figure, axes):
        figure.set_size_inches(max(6.0, 0.45 * longest), 1.3 * len(sentences) + 0.6)
        for axis, sentence in zip(axes[:, 0], sentences, strict=True):
            rows = largest[largest["sentence_id"] == sentence].sort_values("position")
            is_output = np.zeros(len(rows), dtype=bool)
            is_output[output_token] = True
            labels = [
                f"{token}\n(output)" if output else token
                for token, output in zip(rows["token"], is_output, strict=True)
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


def clustering_figures(
    trajectories_path: Path, stats_path: Path, out_trajectories: FigureFiles, out_stats: FigureFiles
) -> None:
    """Fig. 2c/d and 13, in the claim's regime: 3-D token trajectories of the attention-only ODE per magnitude a(t),
    and the final cluster count and mean pairwise distance per magnitude (docs/experiments.md#analyses)."""
    trajectories = read_csv(trajectories_path, TRAJECTORY_COLUMNS, "the trajectories written by the analysis stage")
    stats = read_csv(stats_path, CLUSTER_STATS_COLUMNS, "the clustering statistics written by the analysis stage")
    magnitudes = list(dict.fromkeys(trajectories.sort_values("degree")["magnitude"]))
    with house_figure(out_trajectories, 1, len(magnitudes), subplot_kw={"projection": "3d"}) as (figure, axes):
        for axis, magnitude in zip(axes[0], magnitudes, strict=True):
            rows = trajectories[trajectories["magnitude"] == magnitude].sort_values(["token", "step"])
            for _, path in rows.groupby("token"):
                axis.plot(path["x0"], path["x1"], path["x2"], linewidth=0.5, alpha=0.5)
            final = rows[rows["step"] == rows["step"].max()]
            axis.scatter(final["x0"], final["x1"], final["x2"], color="black", s=6)
            axis.set(xlabel="x₀", ylabel="x₁", zlabel="x₂", title=f"a(t): {magnitude}")

    ordered = stats.sort_values("degree")
    with house_figure(out_stats, 1, 2) as (figure, axes):
        sns.barplot(ordered, x="magnitude", y="n_clusters", color="C0", ax=axes[0, 0])
        axes[0, 0].set(xlabel="magnitude function a(t)", ylabel="final clusters (count)")
        sns.barplot(ordered, x="magnitude", y="mean_pairwise_distance", color="C1", ax=axes[0, 1])
        axes[0, 1].set(xlabel="magnitude function a(t)", ylabel="final mean pairwise distance")
        for axis in axes[0]:
            axis.tick_params(axis="x", rotation=30)


def frontier_figure(paths: list[Path], out: FigureFiles) -> None:
    """Compute/quality frontier: validation perplexity of trained DiffEqFormers re-solved with other step counts
    and solvers, against vector-field evaluations per token."""
    frontier = pd.concat(
        [read_csv(path, FRONTIER_COLUMNS, "the frontier written by the analysis stage") for path in paths],
        ignore_index=True,
    )
    trained = frontier[frontier["step_factor"] == 1.0]
    evaluations = sorted(frontier["field_evaluations"].unique())
    with house_figure(out) as (figure, axes):
        axis = axes[0, 0]
        figure.set_figwidth(figure.get_figwidth() * 1.5)
        sns.lineplot(
            frontier.sort_values("field_evaluations"),
            x="field_evaluations",
            y="val_ppl",
            hue="run_id",
            style="solver",
            markers=True,
            ax=axis,
        )
        axis.scatter(
            trained["field_evaluations"],
            trained["val_ppl"],
            facecolors="none",
            edgecolors="black",
            s=80,
            label="as trained",
        )
        axis.set(
            xscale="log",
            yscale="log",
            xlabel="vector-field evaluations per token (count)",
            ylabel=PPL_LABEL,
            title="Compute/quality frontier",
        )
        axis.xaxis.set_major_locator(FixedLocator(evaluations))
        axis.xaxis.set_major_formatter(FixedFormatter([f"{value:g}" for value in evaluations]))
        axis.xaxis.set_minor_formatter(NullFormatter())
        axis.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.02, 1.0))
