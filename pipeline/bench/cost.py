"""Cost preview: the GPU-hours of every stage of a preset, before anything runs.

Per run, the tokens it processes times the seconds a GPU needs per token:

- pretrain: ``steps × batch_size × seq_len`` training tokens (every run of ``pretrain_runs``);
- finetune: ``steps × batch_size × seq_len`` training tokens of the fine-tuned model (``finetune_runs``): the
  DiffEqFormer source discretised to N' steps (``discrete_diffeq_*``, a vanilla transformer's cost, App. D.1) or
  the GPT baseline. LoRA is costed as a full fine-tune: an upper bound (frozen weights skip their weight
  gradients, about a third of the FLOPs);
- evaluate (lm-eval, App. C.7): forward tokens of each model of ``downstream.pairs``: per task and shot count,
  documents (the evaluation split, or ``limit``) × requests per document (answer choices) × ``seq_len``, an
  upper bound that charges every request a full context window;
- analysis: forward passes over a few sentences or validation sets per run, negligible next to the above.

Periodic validation during training is not counted (at most a few % of a run's tokens).

Each training run also shows its passes over its training data (tokens / the corpus's training tokens, read from
the built token cache's ``stats.json`` when it exists, else the corpus's published size) and the disk its kept
checkpoints take: 12 bytes per parameter (f32 weights + Adam's two moments; for LoRA an upper bound, Levanter saves
the trainable parameters only) × the checkpoints it keeps (``kept_checkpoints``); while a run trains, one more
(the newest) exists.

Seconds per training token come from a measured table ``results/benchmarks/throughput-sizes-<device>.csv``
(``python -m pipeline bench throughput-sizes``; matched on family, size and num_layers) or, for a model it lacks,
from an estimate: Levanter's forward FLOPs per token (``LmConfig.flops_per_token``: matmuls, the full
attention map and the LM head) × 3 for forward + backward, as Levanter's own MFU accounting, divided by
MFU × the device's dense peak. A forward-only token (evaluation) costs a third of a training token.
GPU-hours assume linear data-parallel scaling: wall-clock hours = GPU-hours / GPUs.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import hashlib
import io
import json
import math
from pathlib import Path
from typing import Any

from pipeline.config import REPO_ROOT, RunSpec, TrainSpec, load_preset, pretrain_runs

BENCHMARKS_DIR = REPO_ROOT / "results" / "benchmarks"
THROUGHPUT_COLUMNS = ("device", "family", "size", "hidden_dim", "num_layers", "seq_len", "params",
                      "tokens_per_s_per_gpu", "measured_on", "notes")
"""Columns of a measured throughput table (one row per device, family and size; tokens/s of training)."""
PEAK_TFLOPS = {
    "a100": {"bf16": 312.0, "f32": 156.0},
    "h100": {"bf16": 989.0, "f32": 494.7},
    "h200": {"bf16": 989.0, "f32": 494.7},
}
"""Dense peak TFLOP/s per GPU (NVIDIA datasheets, SXM): bf16/fp16 tensor cores, and TF32 for float32 compute."""
DEFAULT_MFU = 0.4
TRAIN_PASSES = 3
"""FLOPs of a training token in forward-pass units: forward + backward (2×), as Levanter's MFU (train_lm.py)."""
FORWARD_PASSES = 1
LM_EVAL_TASKS = {
    "arc_challenge": (1172, 4),
    "arc_easy": (2376, 4),
    "hellaswag": (10042, 4),
    "lambada_openai": (5153, 1),
    "lambada_standard": (5153, 1),
    "logiqa": (651, 4),
    "mmlu": (14042, 4),
    "piqa": (1838, 2),
    "sciq": (1000, 4),
    "winogrande": (1267, 2),
    "wsc273": (273, 2),
}
"""(documents of the evaluation split, loglikelihood requests per document) of the paper's lm-eval tasks: the
published sizes of the splits lm-eval 0.4.13 evaluates, written here because the hub is unreachable offline (not
counted by this code; a cost estimate only)."""
MAX_REQUESTS_PER_DOCUMENT = max(requests for _, requests in LM_EVAL_TASKS.values())
"""Requests per document assumed for a task not in ``LM_EVAL_TASKS`` (local tasks; they need a ``limit``)."""
PUBLISHED_TRAIN_TOKENS = {
    ("dlwh/wikitext_103_detokenized", "gpt2"): 0.12e9,
    ("Skylion007/openwebtext", "gpt2"): 9.04e9,
}
"""Training tokens of the paper's corpora under a tokenizer, as published: WikiText-103 ≈ 0.12 B GPT-2 tokens
(docs/paper.md#exact-steps), OpenWebText ≈ 9.04 B (nanoGPT's preparation of the same dataset); the fallback of
``data_passes`` before the caches are built. No published count for the Llama tokenizer: "?" until built."""
CHECKPOINT_BYTES_PER_PARAMETER = 12
"""f32 parameters plus Adam's first and second moments, 4 bytes each."""
DISCRETE_FAMILIES = {"diffeq": "discrete_diffeq_gpt", "diffeq_llama": "discrete_diffeq_llama"}
STAGES = ("pretrain", "finetune", "evaluate", "analysis")


@dataclasses.dataclass(frozen=True)
class ModelRecipe:
    """What decides a workload's model, without building its Levanter config: the run's ``RunSpec`` (for a
    fine-tune, its source's) and, for a DiffEqFormer fine-tune, the N' Euler steps it is discretised to."""

    spec: RunSpec
    num_steps: int | None = None

    def build(self):
        from pipeline.models import DiscreteDiffEqGptConfig, DiscreteDiffEqLlamaConfig
        from pipeline.models.checkpoint import run_model_config

        config = run_model_config(self.spec)
        if self.num_steps is None:
            return config
        discrete = {"diffeq": DiscreteDiffEqGptConfig, "diffeq_llama": DiscreteDiffEqLlamaConfig}
        return discrete[self.spec.model.family](source=config, num_steps=self.num_steps)

    def key(self, vocab: int) -> str:
        """The recipe's identity for the model-cost cache: every field ``build`` reads, and the vocabulary."""
        return json.dumps({"model": dataclasses.asdict(self.spec.model), "dropout": self.spec.train.dropout,
                           "num_steps": self.num_steps, "vocab": vocab}, sort_keys=True)


@dataclasses.dataclass(frozen=True)
class Workload:
    """The tokens one run processes with one model; ``passes`` is 3 for training tokens, 1 for forward-only;
    ``train`` is the run's optimisation spec (its precision policy, and what a benchmark's train step uses)."""

    stage: str
    run_id: str
    dataset: str
    tokenizer: str
    family: str
    size: str
    hidden_dim: int
    num_layers: int
    seq_len: int
    tokens: int
    passes: int
    train: TrainSpec
    model: ModelRecipe
    vocab_size: int

    @property
    def throughput_key(self) -> tuple[str, str, int]:
        return self.family, self.size, self.num_layers

    @functools.cached_property
    def model_config(self):
        """The workload's Levanter ``LmConfig`` (built on first use: building imports JAX and Levanter)."""
        return self.model.build()


def vocab_size(config: dict[str, Any], tokenizer: str) -> int:
    """Vocabulary of a preset tokenizer: GPT-2's 50257, Llama-2's 32000, or a trained BPE's ``vocab_size``."""
    from pipeline.families import GPT2_VOCAB, LLAMA_VOCAB

    pretrained = {"gpt2": GPT2_VOCAB, "NousResearch/Llama-2-7b-hf": LLAMA_VOCAB}
    spec = config["tokenizers"][tokenizer]
    if spec["kind"] == "bpe":
        return spec["vocab_size"]
    if spec["name"] not in pretrained:
        raise ValueError(f"key 'tokenizers.{tokenizer}.name' is {spec['name']!r}, whose vocabulary size the cost "
                         f"preview does not know; expected one of {sorted(pretrained)}.")
    return pretrained[spec["name"]]


MODEL_COST_CACHE = REPO_ROOT / ".cache" / "model-cost.json"
"""(parameters, forward FLOPs per token) per model recipe, computed once: counting them builds Levanter configs,
which imports JAX and Levanter (~9 s), and the SLURM profile sizes every job from them each time Snakemake reads
the workflow (``pipeline/site.py``: a dry run, and every submitted job on its node)."""


def model_code_version() -> str:
    """What the cached counts depend on besides the recipe: the model code, this module (``ModelRecipe.build``) and
    the Levanter/Haliax versions."""
    from importlib.metadata import version

    digest = hashlib.sha256(f"levanter {version('levanter')} haliax {version('haliax')}".encode())
    models = REPO_ROOT / "pipeline" / "models"
    sources = [*models.glob("*.py"), REPO_ROOT / "pipeline" / "families.py", Path(__file__)]
    for path in sorted(sources):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


@functools.cache
def model_cost(workload: Workload) -> tuple[int, float]:
    """(parameters, forward FLOPs per token) of a workload's Levanter ``LmConfig``, parameters from shapes only;
    read from ``MODEL_COST_CACHE`` when it holds the recipe under the same model code, else computed and added."""
    cache = read_model_costs()
    key = workload.model.key(workload.vocab_size)
    if key not in cache:
        from pipeline.models import count_params

        config = workload.model_config
        cache[key] = [count_params(config, workload.vocab_size), float(config.flops_per_token(workload.vocab_size))]
        write_model_costs(cache)
    parameters, forward_flops = cache[key]
    return int(parameters), float(forward_flops)


@functools.cache
def read_model_costs() -> dict[str, list]:
    """The cached model costs of the current model code (a cache of other code, or none, reads as empty)."""
    try:
        cached = json.loads(MODEL_COST_CACHE.read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return cached["costs"] if cached.get("code") == model_code_version() else {}


def write_model_costs(costs: dict[str, list]) -> None:
    """Write the cache atomically (parallel jobs may race: the last writer wins, a lost entry is recomputed)."""
    from pipeline.artifacts import atomic_write_json

    MODEL_COST_CACHE.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(MODEL_COST_CACHE, {"code": model_code_version(), "costs": costs})


def pretrain_workloads(config: dict[str, Any]) -> list[Workload]:
    """Every pretraining run: steps × batch_size × seq_len training tokens."""
    return [Workload("pretrain", run_id, spec.dataset, spec.tokenizer, spec.model.family, spec.size,
                     spec.model.hidden_dim, spec.model.num_layers,
                     spec.model.seq_len, spec.train.steps * spec.train.batch_size * spec.model.seq_len, TRAIN_PASSES,
                     spec.train, ModelRecipe(spec), vocab_size(config, spec.tokenizer))
            for run_id, spec in pretrain_runs(config).items()]


def finetune_workloads(config: dict[str, Any]) -> list[Workload]:
    """Every fine-tune of Fig. 5 (§6.2): steps × batch_size × seq_len training tokens of the fine-tuned model,
    the source discretised to N' = ``num_steps`` layers, or the baseline at its own depth."""
    from pipeline.config import finetune_runs

    sources = pretrain_runs(config)
    workloads = []
    for run_id, spec in finetune_runs(config).items():
        source = sources[spec.source_run]
        family, num_layers, model = source.model.family, source.model.num_layers, ModelRecipe(source)
        if spec.num_steps is not None:
            family, num_layers = DISCRETE_FAMILIES[family], spec.num_steps
            model = ModelRecipe(source, num_steps=num_layers)
        tokens = spec.train.steps * spec.train.batch_size * source.model.seq_len
        workloads.append(Workload("finetune", run_id, spec.target_dataset, spec.tokenizer, family, source.size,
                                  source.model.hidden_dim, num_layers,
                                  source.model.seq_len, tokens, TRAIN_PASSES, spec.train,
                                  model, vocab_size(config, spec.tokenizer)))
    return workloads


def lm_eval_requests(downstream: dict[str, Any]) -> int:
    """Loglikelihood requests per model: Σ over tasks and shot counts of documents × requests per document."""
    limit = downstream["limit"]
    requests = 0
    for task in downstream["tasks"]:
        if task in LM_EVAL_TASKS:
            documents, per_document = LM_EVAL_TASKS[task]
        elif limit is None:
            raise ValueError(f"key 'downstream.tasks' names {task!r}, whose size the cost preview does not know; "
                             f"set 'downstream.limit' or use one of {sorted(LM_EVAL_TASKS)}.")
        else:
            documents, per_document = limit, MAX_REQUESTS_PER_DOCUMENT
        requests += min(documents, limit or documents) * per_document * len(downstream["shots"])
    return requests


def downstream_workloads(config: dict[str, Any]) -> list[Workload]:
    """Every model of ``downstream.pairs``: lm-eval requests × seq_len forward tokens (one context window each)."""
    runs = pretrain_runs(config)
    requests = lm_eval_requests(config["downstream"])
    run_ids = dict.fromkeys(run_id for pair in config["downstream"]["pairs"].values() for run_id in pair)
    workloads = []
    for run_id in run_ids:
        spec = runs[run_id]
        workloads.append(Workload("evaluate", run_id, spec.dataset, spec.tokenizer, spec.model.family, spec.size,
                                  spec.model.hidden_dim,
                                  spec.model.num_layers, spec.model.seq_len, requests * spec.model.seq_len,
                                  FORWARD_PASSES, spec.train, ModelRecipe(spec),
                                  vocab_size(config, spec.tokenizer)))
    return workloads


def analysis_run_count(config: dict[str, Any]) -> int:
    """Jobs of the analysis stage: one per run of each per-run analysis, one per whole-preset analysis."""
    return sum(len(section["runs"]) if "runs" in section else 1 for section in config["analysis"].values())


def preset_workloads(config: dict[str, Any]) -> list[Workload]:
    return pretrain_workloads(config) + finetune_workloads(config) + downstream_workloads(config)


def _fail(path: Path, message: str) -> ValueError:
    return ValueError(f"{path}: {message}")


def read_throughput(path: Path, device: str) -> dict[tuple[str, str, int], float]:
    """Measured training tokens/s per GPU of ``device``, keyed by (family, size, num_layers)."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no throughput table; measure one with "
                                "`python -m pipeline bench throughput-sizes`.")
    reader = csv.DictReader(io.StringIO(path.read_text()))
    missing = [column for column in THROUGHPUT_COLUMNS if column not in (reader.fieldnames or [])]
    if missing:
        raise _fail(path, f"missing column {missing[0]!r}; expected the columns {list(THROUGHPUT_COLUMNS)}.")
    table: dict[tuple[str, str, int], float] = {}
    for line, row in enumerate(reader, start=2):
        if row["device"] != device:
            continue
        for column in ("num_layers", "tokens_per_s_per_gpu"):
            try:
                value = float(row[column])
            except (TypeError, ValueError):
                value = math.nan
            if not value > 0 or (column == "num_layers" and not value.is_integer()):
                raise _fail(path, f"column {column!r} must hold a positive number on line {line} "
                                  f"(got {row[column]!r}).")
        key = (row["family"], row["size"], int(row["num_layers"]))
        if key in table:
            raise _fail(path, f"line {line} repeats family {key[0]!r}, size {key[1]!r}, num_layers {key[2]} "
                              f"for device {device!r}; expected one row each.")
        table[key] = float(row["tokens_per_s_per_gpu"])
    if not table:
        raise _fail(path, f"column 'device' has no row for device {device!r}.")
    return table


def compute_precision(mixed_precision: str) -> str:
    """'bf16' or 'f32': the compute dtype of a jmp policy string such as ``p=f32,c=bfloat16``."""
    import jax.numpy as jnp
    import jmp

    compute = jmp.get_policy(mixed_precision).compute_dtype
    return "bf16" if compute in (jnp.bfloat16, jnp.float16) else "f32"


def estimated_tokens_per_s(workload: Workload, device: str, mfu: float) -> float:
    """Training tokens/s per GPU = MFU × peak FLOP/s / (3 × forward FLOPs per token)."""
    if device not in PEAK_TFLOPS:
        family, size, layers = workload.throughput_key
        raise ValueError(f"--device {device!r} has no measured throughput for {workload.run_id} (family {family!r}, "
                         f"size {size!r}, num_layers {layers}) and no peak FLOP/s to estimate from; expected a "
                         f"device in {sorted(PEAK_TFLOPS)} or a measured row.")
    _, forward_flops = model_cost(workload)
    peak = PEAK_TFLOPS[device][compute_precision(workload.train.mixed_precision)] * 1e12
    return mfu * peak / (TRAIN_PASSES * forward_flops)


def corpus_train_tokens(config: dict[str, Any], dataset: str, tokenizer: str) -> float | None:
    """Training tokens of ``dataset`` under ``tokenizer``: the built cache's count, else the published size."""
    stats = REPO_ROOT / "results" / config["preset"] / "data" / "caches" / f"{dataset}-{tokenizer}" / "stats.json"
    if stats.is_file():
        return float(json.loads(stats.read_text())["train"]["tokens"])
    source = config["datasets"][dataset]["source"]
    return PUBLISHED_TRAIN_TOKENS.get((source.get("id"), config["tokenizers"][tokenizer].get("name")))


def kept_checkpoints(train: TrainSpec) -> int:
    """Checkpoints a finished run keeps: the final one (``step-<steps-1>``) plus the periodic ones (saved at the
    steps 0 < s < steps-1 that are multiples of ``checkpoint_every``) whose step is a multiple of
    ``keep_checkpoints_every``."""
    if not train.keep_checkpoints_every:
        return 1
    every = math.lcm(train.checkpoint_every, train.keep_checkpoints_every)
    return 1 + (train.steps - 2) // every


def cost_rows(workloads: list[Workload], device: str, measured: dict[tuple[str, str, int], float],
              mfu: float, config: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per run: tokens, training tokens/s per GPU (measured, else estimated), GPU-hours
    = tokens × passes / 3 / tokens_per_s / 3600, passes over the training data and kept checkpoint bytes."""
    rows = []
    for workload in workloads:
        training = workload.passes == TRAIN_PASSES
        corpus = corpus_train_tokens(config, workload.dataset, workload.tokenizer) if training else None
        parameters, forward_flops = model_cost(workload)
        if workload.throughput_key in measured:
            tokens_per_s, source = measured[workload.throughput_key], "measured"
        else:
            tokens_per_s, source = estimated_tokens_per_s(workload, device, mfu), "estimate"
        gpu_hours = workload.tokens * workload.passes / TRAIN_PASSES / tokens_per_s / 3600
        rows.append({"stage": workload.stage, "run_id": workload.run_id, "family": workload.family,
                     "size": workload.size, "hidden_dim": workload.hidden_dim, "num_layers": workload.num_layers,
                     "seq_len": workload.seq_len, "parameters": parameters, "forward_flops_per_token": forward_flops,
                     "tokens": workload.tokens, "passes": workload.passes, "tokens_per_s_per_gpu": tokens_per_s,
                     "gpu_hours": gpu_hours, "source": source,
                     "data_passes": workload.tokens / corpus if corpus else None,
                     "checkpoint_bytes": (parameters * CHECKPOINT_BYTES_PER_PARAMETER * kept_checkpoints(workload.train)
                                          if training else 0)})
    return rows


def stage_rows(run_rows: list[dict[str, Any]], analysis_runs: int) -> list[dict[str, Any]]:
    """Per stage: runs, tokens, GPU-hours and where the throughput came from; then the analyses and a total."""
    rows = []
    for stage in STAGES[:-1]:
        runs = [row for row in run_rows if row["stage"] == stage]
        sources = sorted({row["source"] for row in runs})
        passes = [row["data_passes"] for row in runs if row["data_passes"] is not None]
        rows.append({"stage": stage, "runs": len(runs), "tokens": sum(row["tokens"] for row in runs),
                     "gpu_hours": sum(row["gpu_hours"] for row in runs), "source": "+".join(sources) or "-",
                     "max_data_passes": max(passes) if passes else None,
                     "checkpoint_bytes": sum(row["checkpoint_bytes"] for row in runs)})
    rows.append({"stage": "analysis", "runs": analysis_runs, "tokens": None, "gpu_hours": None,
                 "source": "negligible", "max_data_passes": None, "checkpoint_bytes": 0})
    rows.append({"stage": "total", "runs": sum(row["runs"] for row in rows),
                 "tokens": sum(row["tokens"] or 0 for row in rows),
                 "gpu_hours": sum(row["gpu_hours"] or 0 for row in rows),
                 "source": "+".join(sorted({row["source"] for row in run_rows})), "max_data_passes": None,
                 "checkpoint_bytes": sum(row["checkpoint_bytes"] for row in rows)})
    return rows


def default_throughput_path(device: str) -> Path:
    return BENCHMARKS_DIR / f"throughput-sizes-{device}.csv"


def preview(preset: str, device: str, throughput: Path | None = None, mfu: float = DEFAULT_MFU,
            preflight: Path | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(stage rows, run rows) of ``preset`` on ``device``; ``throughput`` defaults to the device's measured table
    when it exists; the preflight report (``preflight``, default the preset's), where it measured a model on ``device``,
    wins (source ``preflight``)."""
    if not 0 < mfu <= 1:
        raise ValueError(f"--mfu must be in (0, 1] (got {mfu}).")
    config = load_preset({"preset": preset})
    path = throughput or default_throughput_path(device)
    measured = read_throughput(path, device) if throughput or path.is_file() else {}
    preflight_measured = preflight_throughput(preflight or preflight_table(config), device, config)
    run_rows = cost_rows(preset_workloads(config), device, {**measured, **preflight_measured}, mfu, config)
    for row in run_rows:
        if (row["family"], row["size"], row["num_layers"]) in preflight_measured:
            row["source"] = "preflight"
    return stage_rows(run_rows, analysis_run_count(config)), run_rows


def preflight_table(config: dict[str, Any]) -> Path:
    return REPO_ROOT / "results" / config["preset"] / "preflight.csv"


def preflight_throughput(path: Path, device: str, config: dict[str, Any]) -> dict[tuple[str, str, int], float]:
    """Training tokens/s per GPU of ``device`` that the preflight report ``path`` measured (``pipeline.preflight``)."""
    from pipeline.preflight.measured import measured_throughput

    return measured_throughput(path, device, pretrain_runs(config))


def format_stage_table(rows: list[dict[str, Any]]) -> str:
    """A fixed-width text table: stage, runs, tokens (billions), GPU-hours, most passes over a run's training
    data, kept checkpoint disk (GB), source."""
    header = f"{'stage':<10} {'runs':>5} {'tokens':>12} {'GPU-hours':>11} {'max passes':>10} {'ckpt GB':>9}  source"
    lines = [header, "-" * len(header)]
    for row in rows:
        tokens = "negligible" if row["tokens"] is None else f"{row['tokens'] / 1e9:,.3f} B"
        hours = "~0" if row["gpu_hours"] is None else f"{row['gpu_hours']:,.1f}"
        passes = "-" if row["max_data_passes"] is None else f"{row['max_data_passes']:,.1f}"
        lines.append(f"{row['stage']:<10} {row['runs']:>5} {tokens:>12} {hours:>11} {passes:>10} "
                     f"{row['checkpoint_bytes'] / 1e9:>9,.1f}  {row['source']}")
    return "\n".join(lines)


def format_passes_table(rows: list[dict[str, Any]]) -> str:
    """Passes over the training data per training run ("?": corpus size unknown until its cache is built)."""
    lines = [f"{'run':<44} {'passes':>7}"]
    for row in rows:
        if row["stage"] in ("pretrain", "finetune"):
            passes = "?" if row["data_passes"] is None else f"{row['data_passes']:,.2f}"
            lines.append(f"{row['run_id']:<44} {passes:>7}")
    return "\n".join(lines)


def run_csv(rows: list[dict[str, Any]]) -> str:
    stream = io.StringIO()
    writer = csv.DictWriter(stream, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return stream.getvalue()

