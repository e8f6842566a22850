"""The paper's tables from the stages' tidy files only, each to its ``TableFiles``: Tables 1-2 validation
perplexity, 3 model specifications, 4-5 downstream accuracy, 6 parameters against D."""

from pathlib import Path

import pandas as pd
import yaml

from pipeline.analysis.tidy import PARAM_COUNT_COLUMNS
from pipeline.config.families import BASELINE_FAMILIES, FAMILY_LABELS, LLAMA_FAMILIES
from pipeline.report.intervals import t_interval
from pipeline.report.table_views import TableFiles, write_table
from pipeline.report.tidy_inputs import (
    ACCURACY_METRIC,
    load_downstream,
    load_summaries,
    read_csv,
    read_record,
    require_columns,
)

DATASET_TABLES = {"wt103": "Table 1: WikiText-103", "owt": "Table 2: OpenWebText"}
DATASET_LABELS = {"wt103": "WikiText-103", "owt": "OpenWebText"}
SIZE_ORDER = ["small", "medium", "large", "llama1b", "ft18", "ft24"]
SIZE_RANK = {size: rank for rank, size in enumerate(SIZE_ORDER)}
DOWNSTREAM_TABLES = {
    "gpt-large": "Table 4: downstream accuracy, GPT-large pair",
    "llama-1b": "Table 5: downstream accuracy, Llama-1B pair",
}


def millions(count: int) -> str:
    return f"{count / 1e6:.2f}M"


def perplexity_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Tidy Tables 1-2: the paper's rows (role ``table``), sorted by dataset, size and family."""
    table = runs[runs["role"] == "table"].copy()
    table["model"] = table["family"].map(FAMILY_LABELS)
    table["size_rank"] = table["size"].map(SIZE_RANK)
    table["family_rank"] = table["family"].map({family: rank for rank, family in enumerate(FAMILY_LABELS)})
    table = table.sort_values(["dataset", "size_rank", "family_rank"], ascending=[False, True, True])
    return table[["dataset", "size", "family", "model", "run_id", "parameters", "tokens_seen", "val_ppl"]]


def perplexity_cell(perplexities: list[float], parameters: int) -> str:
    """'ppl (params)' of one run; over several seeds 'mean ± half-width (params, n seeds)', the half-width of the
    95 % t-interval of the mean (``pipeline.report.intervals``)."""
    if len(perplexities) == 1:
        return f"{perplexities[0]:.2f} ({millions(parameters)})"
    interval = t_interval(perplexities)
    return f"{interval.mean:.2f} ± {interval.high - interval.mean:.2f} ({millions(parameters)}, {interval.n} seeds)"


def write_perplexity_tables(summaries: list[Path], *, out: TableFiles) -> None:
    """Tables 1-2 (``out``) from the summaries of their runs: one wide table per dataset, models as rows, sizes as
    columns, cells 'ppl (params)' (``perplexity_cell``)."""
    runs = load_summaries(summaries)
    table = perplexity_table(runs)
    sections = {}
    for dataset, title in DATASET_TABLES.items():
        rows = table[table["dataset"] == dataset]
        if rows.empty:
            continue
        cells = rows.groupby(["model", "size"])[["val_ppl", "parameters"]].agg(list).reset_index()
        cells["cell"] = [
            perplexity_cell(ppl, params[0]) for ppl, params in zip(cells["val_ppl"], cells["parameters"], strict=True)
        ]
        wide = cells.pivot(index="model", columns="size", values="cell")
        sections[title] = wide.reindex(
            index=[label for label in FAMILY_LABELS.values() if label in wide.index],
            columns=[size for size in SIZE_ORDER if size in wide.columns],
        ).fillna("–")
    write_table(
        out,
        heading=f"Validation perplexity (preset `{runs['preset'].iloc[0]}`)",
        note="Cells: validation perplexity over the whole validation split (parameters); over several seeds "
        "the mean ± half-width of its 95 % t-interval. Lower is better.",
        tidy=table,
        sections=sections,
    )


def levanter_1_1_count(model: dict, parameters: int) -> int:
    """Parameters of ModelSpec ``model`` as Levanter 1.1 counted them for Table 3 (docs/paper.md#parameter-counts):
    trainable + L·2·seq_len·head_size RoPE cache leaves of its Llama layers (Llama-1B: 8.39 M); GPT has none."""
    if model["family"] not in LLAMA_FAMILIES:
        return parameters
    return parameters + model["num_layers"] * 2 * model["seq_len"] * (model["hidden_dim"] // model["num_heads"])


SHAPE_COLUMNS = {"num_layers": "layers", "hidden_dim": "hidden_dim", "num_heads": "heads", "seq_len": "seq_len"}
"""Table 3's shape columns, by the ModelSpec key each is read from."""


def model_spec_table(summaries: list[Path]) -> pd.DataFrame:
    """Tidy Table 3: shape of each baseline model size, read from the ``config.yaml`` beside each run's summary
    (one row per size and family; the sizes are the same on both datasets)."""
    rows = []
    for path in summaries:
        config_path = Path(path).parent / "config.yaml"
        if not config_path.is_file():
            raise FileNotFoundError(f"{config_path}: not found; expected the resolved run spec beside {path}.")
        spec = yaml.safe_load(config_path.read_text())
        require_columns(spec, ["size", "model"], config_path, "a resolved RunSpec")
        model = spec["model"]
        require_columns(model, ["family", *SHAPE_COLUMNS], config_path, "a resolved ModelSpec under 'model'")
        summary = read_record(path, ["parameters"], "a summary written by pretrain")
        rows.append(
            {
                "size": spec["size"],
                "family": model["family"],
                "parameters": summary["parameters"],
                "levanter_1_1_parameters": levanter_1_1_count(model, summary["parameters"]),
                **{column: model[key] for key, column in SHAPE_COLUMNS.items()},
                "intermediate_dim": model.get("intermediate_dim"),
            }
        )
    table = pd.DataFrame(rows).drop_duplicates(["size", "family"])
    table["size_rank"] = table["size"].map(SIZE_RANK)
    return table.sort_values(["size_rank", "family"]).drop(columns="size_rank").reset_index(drop=True)


def write_model_spec_table(summaries: list[Path], *, out: TableFiles) -> None:
    """Table 3 (``out``) in the paper's layout: specifications as rows, the baseline models as columns."""
    table = model_spec_table(summaries)
    baselines = table[table["family"].isin(BASELINE_FAMILIES)].set_index("size")
    names = {
        size: "Llama-1B" if size == "llama1b" else f"{FAMILY_LABELS[row.family]}-{size}"
        for size, row in baselines.iterrows()
    }
    wide = pd.DataFrame(
        {
            "Parameters (trainable)": baselines["parameters"].map(millions),
            "Parameters (Levanter 1.1 count)": baselines["levanter_1_1_parameters"].map(millions),
            "Layers": baselines["layers"].astype(str),
            "Hidden size": baselines["hidden_dim"].astype(str),
            "Attention heads": baselines["heads"].astype(str),
            "Sequence length": baselines["seq_len"].astype(str),
            "FF size": baselines["intermediate_dim"].astype("Int64").astype(str).replace("<NA>", "4 × hidden"),
        }
    ).T.rename(columns=names)
    write_table(
        out,
        heading="Model specifications",
        note="Read from each run's resolved config.yaml; parameters "
        "from its summary.json (trainable), and as Levanter 1.1 counted them for the paper (Llama: + the RoPE "
        "caches stored per layer, docs/paper.md#parameter-counts).",
        tidy=table,
        sections={"Table 3: model specifications": wide},
    )


def downstream_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Tidy Tables 4-5: accuracy and its standard error in percent, per task, shots and model."""
    table = rows[rows["metric"] == ACCURACY_METRIC].copy()
    table["model"] = table["family"].map(FAMILY_LABELS)
    table["role"] = table["family"].map(lambda family: "baseline" if family in BASELINE_FAMILIES else "diffeq")
    table["acc"] = 100 * table["value"]
    table["acc_stderr"] = 100 * table["stderr"]
    return (
        table[["pair", "task", "shots", "role", "model", "run_id", "acc", "acc_stderr", "n_samples"]]
        .sort_values(["pair", "shots", "task", "role"])
        .reset_index(drop=True)
    )


def write_downstream_table(paths: list[Path], *, out: TableFiles) -> None:
    """Tables 4-5 (``out``) in the paper's layout: tasks as rows; for each shot count the baseline then
    DiffEqFormer, 'acc (stderr)'."""
    table = downstream_table(load_downstream(paths))
    sections = {}
    for pair, rows in table.groupby("pair", sort=False):
        cells = rows.assign(
            cell=[f"{acc:.2f} ({stderr:.2f})" for acc, stderr in zip(rows["acc"], rows["acc_stderr"], strict=True)],
            column=[f"{shots}-shot {model}" for shots, model in zip(rows["shots"], rows["model"], strict=True)],
        )
        order = cells.sort_values(["shots", "role"])["column"].drop_duplicates().tolist()
        wide = cells.pivot(index="task", columns="column", values="cell")[order].fillna("–")
        sections[DOWNSTREAM_TABLES.get(pair, f"Downstream accuracy, {pair} pair")] = wide
    write_table(
        out,
        heading="Downstream accuracy (%)",
        note="lm-evaluation-harness accuracy (standard error), zero- and few-shot; higher is better.",
        tidy=table,
        sections=sections,
    )


def param_count_table(path: Path) -> pd.DataFrame:
    """Tidy Table 6: parameters of each model against the time-embedding dimension D (baselines have none)."""
    table = read_csv(path, PARAM_COUNT_COLUMNS, "the parameter counts written by the analysis stage")
    return table.sort_values(["model", "time_embed_dim"], na_position="first").reset_index(drop=True)


def write_param_count_table(path: Path, *, out: TableFiles) -> None:
    table = param_count_table(path)
    wide = pd.DataFrame(
        {
            "Time-embedding D": table["time_embed_dim"].astype("Int64").astype(str).replace("<NA>", "–"),
            "Parameters": table["parameters"].map(millions),
        }
    ).set_axis(pd.Index(table["model"].tolist(), name="model"))
    write_table(
        out,
        heading="Parameter counts",
        note="DiffEqFormer's parameters grow linearly with D (paper Eq. 6); the baselines' rows have no D.",
        tidy=table,
        sections={"Table 6: parameters against the time-embedding dimension D": wide},
    )
