"""A preset's grid, enumerated once by ``Grid.load(config)``: one ``Workload`` per job it trains or evaluates, and the
per-run GPU analyses (docs/planning.md#where-planning-lives). Longer than 300 lines because every kind of job the
workflow runs is enumerated here once, so that each reader (the workflow's rules, job sizing, the cost preview, the
fit table, the preflight) takes the same objects, with what each job costs (lm-eval's requests, each model's
parameters and FLOPs per token, counted once and cached: ``Workload.cost``)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from pathlib import Path
from typing import Any, ClassVar

from pipeline.config import REPO_ROOT, FinetuneSpec, RunSpec, TrainSpec, finetune_runs, memory_probes, pretrain_runs
from pipeline.config.families import GPT2_VOCAB, LLAMA_VOCAB
from pipeline.config.specs import MODEL, PLAN, role_values

TRAIN_PASSES = 3
"""FLOPs of a training token in forward-pass units: forward + backward (2×), as Levanter's MFU (train_lm.py)."""
DISCRETE_FAMILIES = {"diffeq": "discrete_diffeq_gpt", "diffeq_llama": "discrete_diffeq_llama"}
GPU_ANALYSES = ("spectra", "lyapunov", "frontier")
"""The per-run analyses of ``analysis.<name>.runs`` that run on a GPU, each its own verb."""
FINETUNE_METHODS = ("lora", "full")
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
"""(documents of the evaluation split, loglikelihood requests per document) of the paper's lm-eval tasks as published
for lm-eval 0.4.13 (the hub is unreachable offline); a task not listed needs a ``limit``."""


def lm_eval_requests(downstream: dict[str, Any]) -> int:
    """Loglikelihood requests lm-eval sends one model: Σ over tasks and shot counts of documents × requests per document
    (an unlisted task's: ``limit`` × the most per document)."""
    limit, most = downstream["limit"], max(requests for _, requests in LM_EVAL_TASKS.values())
    requests = 0
    for task in downstream["tasks"]:
        if task not in LM_EVAL_TASKS and limit is None:
            raise ValueError(
                f"key 'downstream.tasks' names {task!r}, whose size the cost preview does not know; "
                f"set 'downstream.limit' or use one of {sorted(LM_EVAL_TASKS)}."
            )
        documents, per_document = LM_EVAL_TASKS.get(task, (limit, most))
        requests += min(documents, limit or documents) * per_document * len(downstream["shots"])
    return requests


@dataclasses.dataclass(frozen=True)
class ModelRecipe:
    """What decides a workload's model, unbuilt: the (source) run's spec and a DiffEqFormer fine-tune's N'."""

    spec: RunSpec
    euler_steps: int | None = None

    def build(self):
        from pipeline.models import DiscreteDiffEqGptConfig, DiscreteDiffEqLlamaConfig
        from pipeline.models.checkpoint import run_model_config

        config = run_model_config(self.spec)
        if self.euler_steps is None:
            return config
        discrete = {"diffeq": DiscreteDiffEqGptConfig, "diffeq_llama": DiscreteDiffEqLlamaConfig}
        return discrete[self.spec.model.family](source=config, num_steps=self.euler_steps)

    def key(self, vocab: int) -> str:
        """The model-cost cache's key: the run's fields of role ``MODEL`` (what ``build`` reads), N' and vocabulary."""
        return json.dumps(
            {"run": role_values(self.spec, MODEL), "euler_steps": self.euler_steps, "vocab": vocab}, sort_keys=True
        )


@dataclasses.dataclass(frozen=True)
class Workload:
    """One job of the grid on the run ``run`` with its tokenizer's vocabulary ``vocab``; a subclass per kind says what
    differs, so that no reader branches on ``kind`` (the fit table's ``role``; ``stage``: the cost preview's)."""

    run: RunSpec
    vocab: int | None = dataclasses.field(kw_only=True)

    kind: ClassVar[str]
    stage: ClassVar[str]
    trains: ClassVar[bool] = True
    """Whether it runs train steps (forward and backward, micro-batched), else forward passes only."""
    preflight_row_kind: ClassVar[str | None] = None
    """The ``kind`` of the preflight row that measures its training throughput (None: none does)."""
    whole_batch: ClassVar[bool] = False
    """Whether it steps its whole batch at once on one node's GPUs, never accumulated (a memory probe)."""

    @property
    def passes(self) -> int:
        return TRAIN_PASSES if self.trains else 1

    @property
    def spec(self) -> RunSpec | FinetuneSpec:
        """The spec its verb is given (a fine-tune's own), its id and train spec (of the step planned)."""
        return self.run

    @property
    def run_id(self) -> str:
        return self.spec.run_id

    @property
    def model_id(self) -> str:
        return self.run_id

    @property
    def train(self) -> TrainSpec:
        return self.spec.train

    def devices(self, gpus: int) -> int:
        return gpus

    @property
    def batch_size(self) -> int:
        return self.train.batch_size

    @property
    def dataset(self) -> str:
        """The dataset it reads (a fine-tune's: its target)."""
        return self.run.dataset

    @property
    def recipe(self) -> ModelRecipe:
        return ModelRecipe(self.run)

    @property
    def tokenizer(self) -> str:
        """Its tokenizer (a fine-tune's: its source run's)."""
        return self.run.tokenizer

    @property
    def family(self) -> str:
        """The model's family (a DiffEqFormer fine-tune's: the discretised one)."""
        return self.run.model.family if self.recipe.euler_steps is None else DISCRETE_FAMILIES[self.run.model.family]

    @property
    def num_layers(self) -> int:
        return self.run.model.num_layers if self.recipe.euler_steps is None else self.recipe.euler_steps

    @property
    def throughput_key(self) -> tuple[str, str, int]:
        return self.family, self.run.size, self.num_layers

    @property
    def tokens(self) -> int:
        """Training tokens: steps × batch_size × seq_len."""
        return self.train.steps * self.train.batch_size * self.run.model.seq_len

    @property
    def known_vocab(self) -> int:
        """``vocab``; ``ValueError`` for a hub tokenizer whose vocabulary the planning does not know (None)."""
        if self.vocab is None:
            raise ValueError(
                f"key 'tokenizers.{self.tokenizer}.name' names a tokenizer whose vocabulary size the cost preview "
                f"does not know; expected one of {sorted(PRETRAINED_VOCAB)}."
            )
        return self.vocab

    @functools.cached_property
    def cost(self) -> tuple[int, float]:
        """(parameters, forward FLOPs per token) of its model (``recipe_cost``)."""
        return recipe_cost(self.recipe, self.known_vocab)

    @property
    def parameters(self) -> int:
        return self.cost[0]

    @property
    def forward_flops(self) -> float:
        return self.cost[1]

    @functools.cached_property
    def plan_key(self) -> str:
        """The identity of its fit row's plan: the hash of what its plan depends on, its kind, the vocabulary, the
        fields of role ``PLAN`` of its specs, and the train step's version (``TRAIN_STEP``: a changed step, e.g.
        without buffer donation, plans differently)."""
        from pipeline.train.digests import json_digest
        from pipeline.train.identity import TRAIN_STEP

        parts = {
            "role": self.kind,
            "model": role_values(self.run.model, PLAN),
            "vocab_size": self.known_vocab,
            "train_step": TRAIN_STEP,
            "train": role_values(self.train, PLAN),
            "finetune": self.finetune_role_values(PLAN),
        }
        return json_digest(parts, length=16)

    def finetune_role_values(self, role: str) -> dict[str, Any] | None:
        """A fine-tune's spec fields of ``role`` (``pipeline.config.specs``); None for any other workload."""
        return None

    def adapted(self, model, key):
        """The model its train step starts from, given the run's model as built."""
        return model

    def trainable_filter(self):
        """Which of the model's parameters train (``pipeline.train.finetune.trainable_filter``); None: all."""
        return None


class Pretraining(Workload):
    """A pretraining run; its shape's preflight job measures it (``training_shapes``)."""

    kind = stage = preflight_row_kind = "pretrain"


class MemoryProbe(Workload):
    """A memory probe (Fig. 16): one step of its whole batch on one node's GPUs."""

    kind = stage = "probe"
    whole_batch = True


@dataclasses.dataclass(frozen=True)
class Finetuning(Workload):
    """A fine-tune (Fig. 5) of the source run ``run``: its model the source's (a DiffEqFormer's resampled to N')."""

    finetune: FinetuneSpec
    kind = stage = "finetune"

    @property
    def spec(self) -> FinetuneSpec:
        return self.finetune

    def finetune_role_values(self, role: str) -> dict[str, Any]:
        return role_values(self.finetune, role)

    @property
    def dataset(self) -> str:
        return self.finetune.target_dataset

    def adapted(self, model, key):
        """The source's model resampled to the fine-tune's N' steps (``pipeline.train.finetune.resample``)."""
        from pipeline.train.finetune import resample

        return resample(self.finetune, model, key)

    @property
    def recipe(self) -> ModelRecipe:
        return ModelRecipe(self.run, euler_steps=self.finetune.euler_steps)

    def trainable_filter(self):
        from pipeline.train.finetune import trainable_filter

        return trainable_filter(self.finetune)

    @property
    def preflight_row_kind(self) -> str:
        """Its method's stage job (``finetune-lora``, ``finetune-full``)."""
        return f"finetune-{self.finetune.method}"


@dataclasses.dataclass(frozen=True)
class Downstream(Workload):
    """lm-eval's forward passes on the pretrained run ``run`` (App. C.7), on one GPU, ``BATCH_SIZE`` requests each, as
    the preset's ``downstream`` section sets them."""

    downstream: dict[str, Any] = dataclasses.field(kw_only=True, compare=False)
    kind, stage = "downstream", "evaluate"
    trains = False

    @property
    def run_id(self) -> str:
        return f"downstream-{self.run.run_id}"

    @property
    def model_id(self) -> str:
        return self.run.run_id

    @property
    def batch_size(self) -> int:
        from pipeline.evaluate import BATCH_SIZE

        return BATCH_SIZE

    @property
    def tokens(self) -> int:
        """Forward tokens: lm-eval's requests × ``seq_len`` (a full context window each: an upper bound)."""
        return lm_eval_requests(self.downstream) * self.run.model.seq_len

    def devices(self, gpus: int) -> int:
        return 1


PRETRAINED_VOCAB = {"gpt2": GPT2_VOCAB, "NousResearch/Llama-2-7b-hf": LLAMA_VOCAB}


def vocab_size(config: dict[str, Any], tokenizer: str) -> int | None:
    """Vocabulary of a preset tokenizer: GPT-2's 50257, Llama-2's 32000, a trained BPE's ``vocab_size``; None for
    another hub tokenizer (``Workload.known_vocab``)."""
    spec = config["tokenizers"][tokenizer]
    return spec["vocab_size"] if spec["kind"] == "bpe" else PRETRAINED_VOCAB.get(spec["name"])


MODEL_COST_CACHE = REPO_ROOT / ".cache" / "model-cost.json"
"""(parameters, forward FLOPs per token) per model recipe, computed once: counting them imports JAX and Levanter
(~9 s), and the SLURM profile sizes every job from them each time Snakemake reads the workflow."""


def model_code_version() -> str:
    """What the cached counts depend on besides the recipe: the model code, this module and Levanter/Haliax."""
    from importlib.metadata import version

    digest = hashlib.sha256(f"levanter {version('levanter')} haliax {version('haliax')}".encode())
    models = REPO_ROOT / "pipeline" / "models"
    sources = [*models.glob("*.py"), REPO_ROOT / "pipeline" / "config" / "families.py", Path(__file__)]
    for path in sorted(sources):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


@functools.cache
def recipe_cost(recipe: ModelRecipe, vocab: int) -> tuple[int, float]:
    """(parameters, forward FLOPs per token) of a recipe, from ``MODEL_COST_CACHE`` under the same model code, else
    computed and added (written atomically: parallel jobs may race, the last writer wins, a lost entry is recounted)."""
    cache = read_model_costs()
    key = recipe.key(vocab)
    if key not in cache:
        from pipeline.artifacts import atomic_write_json
        from pipeline.models import count_params

        config = recipe.build()
        cache[key] = [count_params(config, vocab), float(config.flops_per_token(vocab))]
        MODEL_COST_CACHE.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(MODEL_COST_CACHE, {"code": model_code_version(), "costs": cache})
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


@dataclasses.dataclass(frozen=True, eq=False)
class Grid:
    """Every job of one resolved preset ``config``, by id (``downstream-<run>`` once per run of ``downstream.pairs``),
    and by analysis name and run id the pretraining runs each GPU analysis reads."""

    config: dict[str, Any]
    pretraining: dict[str, Pretraining]
    probes: dict[str, MemoryProbe]
    finetunes: dict[str, Finetuning]
    downstream: dict[str, Downstream]
    analyses: dict[str, dict[str, Pretraining]]

    @classmethod
    def load(cls, config: dict[str, Any]) -> Grid:
        """The grid of ``config`` as ``load_preset`` resolves it."""
        runs = pretrain_runs(config)
        vocab = {name: vocab_size(config, name) for name in config["tokenizers"]}
        pretraining = {run_id: Pretraining(spec, vocab=vocab[spec.tokenizer]) for run_id, spec in runs.items()}
        probes = {
            run_id: MemoryProbe(spec, vocab=vocab[spec.tokenizer]) for run_id, spec in memory_probes(config).items()
        }
        finetunes = {
            key: Finetuning(runs[spec.source_run], spec, vocab=vocab[spec.tokenizer])
            for key, spec in finetune_runs(config, runs).items()
        }
        paired = [runs[run_id] for pair in config["downstream"]["pairs"].values() for run_id in pair]
        downstream = [Downstream(run, vocab=vocab[run.tokenizer], downstream=config["downstream"]) for run in paired]
        analysed = {name: config["analysis"][name]["runs"] for name in GPU_ANALYSES}
        analyses = {name: {run_id: pretraining[run_id] for run_id in run_ids} for name, run_ids in analysed.items()}
        return cls(config, pretraining, probes, finetunes, {job.run_id: job for job in downstream}, analyses)

    @functools.cached_property
    def workloads(self) -> dict[str, Workload]:
        """Every workload by id: pretraining runs, memory probes, fine-tunes, downstream jobs, in that order."""
        return {**self.pretraining, **self.probes, **self.finetunes, **self.downstream}

    @property
    def training(self) -> dict[str, Workload]:
        return {**self.pretraining, **self.finetunes}

    @property
    def costed(self) -> list[Workload]:
        """The workloads the cost preview counts: every one but the memory probes (a few steps each)."""
        return [workload for workload_id, workload in self.workloads.items() if workload_id not in self.probes]

    @property
    def runs(self) -> dict[str, RunSpec]:
        return {run_id: job.run for run_id, job in self.pretraining.items()}
