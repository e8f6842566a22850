"""The fidelity ledger (docs/experiments.md#fidelity-ledger): every choice that can move a paper number, with the
paper's and the authors' code's value (``reference/fidelity.csv``), this pipeline's read from the resolved preset or
code constants by ``pipeline_values`` (never typed), and the preset key that switches it."""

import functools
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.config.families import SHARED_FAMILIES
from pipeline.report.table_views import TableFiles, write_views

LEDGER_PATH = Path(__file__).parent / "reference" / "fidelity.csv"
PRESET_SECTIONS = ("preset", "datasets", "fidelity", "defaults", "pretrain", "finetune", "analysis")
"""The parts of a resolved preset that ``pipeline_values`` reads."""
LEDGER_COLUMNS = ["id", "choice", "paper", "reference_code", "pipeline", "key", "decision"]
FIDELITY_MEANINGS = {
    "init": {
        "reference": "every Linear N(0, 0.02²), biases 0; GPT embeddings ·0.02 / ·0.01, Llama std 1; "
        "DiffEqFormer-GPT's two block norms start identical",
        "levanter": "haliax fan-in Linear init, Levanter's embedding init, W(t) calibrated to std 0.02",
    },
    "decay_mask": {
        "reference": "pretraining per family as the authors' code (docs/paper.md#weight-decay); every "
        "trained parameter in fine-tunes (LoRA: adapters and embeddings) and in their sources",
        "family": "per family (docs/paper.md#weight-decay) in every run, fine-tunes and their sources included",
        "levanter": "Levanter's default mask (every weight but norms, embeddings, biases)",
    },
    "time_grid": {
        "reference": "t_k = fl(fl(k)·fl(1/L)) in the weights' dtype ({compute} in training and "
        "evaluation, the parameters' in resampling and the analyses)",
        "exact": "t_k = k/L in float32, then cast to e(t)'s dtype",
    },
    "time_precision": {
        "compute": "e(t) in the compute dtype ({compute}) in training, the parameters' in resampling",
        "float32": "e(t) always in float32",
    },
    "llama_layer": {
        "reference": "chained norms, RMSNorm with scale and shift, eps 1e-6, final norm eps 1e-5",
        "levanter": "norms side by side, RMSNorm scale only, eps 1e-5",
    },
    "resampling": {
        "output": "dt' multiplies each block's output, weights unscaled",
        "folded": "dt' folded into the output projections",
    },
    "lora_init": {
        "reference": "A, B ~ 1e-6·N(0,1); rank {rank}, α = 8",
        "levanter": "Levanter's A, B = 0; rank {rank}, α = 8",
    },
    "eval_split": {
        "test": "the target's test split where its source has one ({splits})",
        "validation": "the target's validation split ({splits})",
    },
}
"""What each value of a ``fidelity.*`` preset key does (schema: pipeline/config/schema.yaml)."""
SHARED_DESIGNS = {
    "shared": "one sequential GPT-2 block reused L times, x_l = Block(x_{l-1})",
    "shared_ode": "the ODE-style shared field x_l = x_{l-1} + dt·(Attn(LN1 x) + FF(LN2 x)), one set of weights, "
    "dt = 1/L",
}
"""The weight-sharing designs of docs/paper.md#weight-sharing, by family (``pipeline.models.shared_gpt``)."""


def read_ledger() -> pd.DataFrame:
    return pd.read_csv(LEDGER_PATH, keep_default_na=False, dtype=str)


def _lookup(config: dict[str, Any], key: str) -> Any:
    """The value at a dotted key of the resolved preset (group names may contain dots: try the longest match)."""
    node: Any = config
    parts = key.split(".")
    while parts:
        for size in range(len(parts), 0, -1):
            name = ".".join(parts[:size])
            if isinstance(node, dict) and name in node:
                node, parts = node[name], parts[size:]
                break
        else:
            raise KeyError(f"{LEDGER_PATH}: key {key!r} does not resolve in the preset; fix the ledger row.")
    return node


def _resolved_train(config: dict[str, Any], group: str, name: str) -> str:
    """Group ``group``'s train key ``name`` after its defaults, or a note that the preset does not train the group."""
    if group not in config["pretrain"]:
        return f"group {group} not in this preset"
    return str({**config["defaults"]["train"], **config["pretrain"][group]["train"]}[name])


def weight_sharing(config: dict[str, Any]) -> str:
    """Which weight-sharing designs the preset trains, and in which groups."""
    groups = {
        family: [name for name, group in config["pretrain"].items() if family in group["families"]]
        for family in SHARED_FAMILIES
    }
    return (
        "; ".join(
            f"{family} ({', '.join(names)}): {SHARED_DESIGNS[family]}" for family, names in groups.items() if names
        )
        or "no weight-sharing run"
    )


def pipeline_values(config: dict[str, Any]) -> dict[str, str]:
    """What this pipeline does for every ledger row, read from the resolved preset ``config`` and the code."""
    from pipeline.config import finetune_eval_split

    fidelity = config["fidelity"]
    compute = config["defaults"]["train"]["mixed_precision"].split("c=")[-1]
    lora = config["finetune"]["methods"].get("lora", {})
    splits = "; ".join(
        f"{source} → {target}: {finetune_eval_split(config, target)}"
        for source, target in config["finetune"]["directions"]
    )
    values = {
        name: f"{value}: "
        + FIDELITY_MEANINGS[name][value].format(compute=compute, rank=lora.get("rank"), splits=splits)
        for name, value in fidelity.items()
    }
    clustering = config["analysis"]["clustering"]
    values.update(
        {
            "beta2_large": _resolved_train(config, "owt-large", "beta2"),
            "beta2_llama": _resolved_train(config, "owt-llama1b", "beta2"),
            "evaluate_at": "a resampled norm is its forward at t_k: (1 + h(t)·F_w), h(t)·F_b with the norm's own MLP h",
            "lora_trainable": ("adapters + embeddings" if lora.get("train_embeddings") else "adapters only")
            + f"; decayed per fidelity.decay_mask {fidelity['decay_mask']}",
            "weight_sharing": weight_sharing(config),
            "clustering": "; ".join(
                f"{label} ({regime['role']}): T = {regime['horizon']:g}, dt = {regime['dt']:g}, "
                f"a(t) {regime['magnitude']} × {regime['scale']:g}"
                for label, regime in clustering["regimes"].items()
            )
            + f"; symmetric QK, no 1/√d, x0 ~ U(−{clustering['x0_range']:g}, {clustering['x0_range']:g}), "
            f"{clustering['seeds']} seeds; the picture: the claim regime, seed {clustering['seed']}",
            "param_count": (
                "Table 3 shows both: trainable parameters and Levanter 1.1's count (+ per-layer RoPE caches)"
            ),
        }
    )
    return values


def ledger(config: dict[str, Any]) -> pd.DataFrame:
    """The ledger with its "this pipeline" column for the resolved preset; a row without a value is an error."""
    rows = read_ledger()
    values = pipeline_values(config)
    missing = sorted(set(rows["id"]) - set(values))
    if missing:
        raise KeyError(f"{LEDGER_PATH}: rows {missing} have no reader in pipeline.report.fidelity.pipeline_values.")
    trained = tuple(f"pretrain.{group}." for group in config["pretrain"])
    for key in rows["key"]:
        if key and (key.startswith(trained) or not key.startswith("pretrain.")):  # else: a group not in the preset
            _lookup(config, key)
    rows["pipeline"] = rows["id"].map(values)
    return rows[LEDGER_COLUMNS]


@functools.cache
def _moves() -> tuple[tuple[str, tuple[str, ...]], ...]:
    return tuple((row.id, tuple(row.moves.split("|"))) for row in read_ledger().itertuples())


def linked_rows(source: str) -> str:
    """The ids of the ledger rows whose ``moves`` name the paper location ``source`` (comma-separated)."""
    return ", ".join(row_id for row_id, moves in _moves() if source in moves)


def write_fidelity_table(config: dict[str, Any], *, out: TableFiles) -> None:
    """``out.csv``, ``out.md`` and ``out.html``: the ledger for the preset that ran."""
    table = ledger(config)
    markdown = f"# Fidelity ledger (preset `{config['preset']}`)\n\n" + table.to_markdown(index=False) + "\n"
    write_views(out, table, markdown, "td,th{padding:2px 8px;vertical-align:top}", table.to_html(index=False))
