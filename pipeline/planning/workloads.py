"""Every job a preset trains or evaluates, as one ``Workload`` each: what cost, fit and job sizing plan.

A workload's ``kind`` is ``pretrain`` (a pretraining run), ``probe`` (a memory probe, Fig. 16: one step of its whole
batch), ``finetune`` (Fig. 5: its model is the source run's, discretised to N' Euler steps or the baseline at its
own depth) or ``downstream`` (lm-eval's forward passes on a pretrained run, App. C.7).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from pipeline.config import FinetuneSpec, RunSpec, TrainSpec, finetune_runs, memory_probes, pretrain_runs
from pipeline.config.specs import MODEL, role_values, to_dict

KINDS = ("pretrain", "probe", "finetune", "downstream")
TRAIN_PASSES = 3
"""FLOPs of a training token in forward-pass units: forward + backward (2×), as Levanter's MFU (train_lm.py)."""
FORWARD_PASSES = 1
DISCRETE_FAMILIES = {"diffeq": "discrete_diffeq_gpt", "diffeq_llama": "discrete_diffeq_llama"}


@dataclasses.dataclass(frozen=True)
class ModelRecipe:
    """What decides a workload's model, without building its Levanter config: the run's ``RunSpec`` (for a
    fine-tune, its source's) and, for a DiffEqFormer fine-tune, the N' Euler steps it is discretised to."""

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
        """The recipe's identity for the model-cost cache: the run's fields of role ``MODEL`` (what ``build`` reads,
        ``pipeline.config.specs``), the Euler steps and the vocabulary."""
        return json.dumps(
            {"run": role_values(self.spec, MODEL), "euler_steps": self.euler_steps, "vocab": vocab}, sort_keys=True
        )


@dataclasses.dataclass(frozen=True)
class Workload:
    """One job of kind ``kind`` (one of ``KINDS``) on the run ``run``; a fine-tune's ``finetune`` spec, whose source
    is ``run``."""

    kind: str
    run: RunSpec
    finetune: FinetuneSpec | None = None

    def __post_init__(self):
        if self.kind not in KINDS or (self.kind == "finetune") != (self.finetune is not None):
            raise ValueError(
                f"{self.run.run_id}: a workload's kind must be one of {KINDS} (a fine-tune's with its "
                f"FinetuneSpec), got {self.kind!r}."
            )

    @property
    def run_id(self) -> str:
        """The job's id: the run's; a fine-tune's own; ``downstream-<run>`` for lm-eval on a run."""
        if self.kind == "downstream":
            return f"downstream-{self.run.run_id}"
        return self.run.run_id if self.finetune is None else self.finetune.run_id

    @property
    def model_id(self) -> str:
        """The id of the model the job runs: a downstream job's evaluated run, else ``run_id``."""
        return self.run.run_id if self.kind == "downstream" else self.run_id

    @property
    def train(self) -> TrainSpec:
        """The train spec of the step planned: the fine-tune's own, else the run's."""
        return self.run.train if self.finetune is None else self.finetune.train

    @property
    def batch_size(self) -> int:
        """Examples per train step; downstream, lm-eval requests per forward pass."""
        from pipeline.evaluate import BATCH_SIZE

        return BATCH_SIZE if self.kind == "downstream" else self.train.batch_size

    def devices(self, gpus: int) -> int:
        """Devices the workload runs on: a training job's ``gpus``; downstream, its job's one GPU."""
        return 1 if self.kind == "downstream" else gpus

    @property
    def stage(self) -> str:
        """The cost preview's stage: ``evaluate`` for downstream, else the kind."""
        return "evaluate" if self.kind == "downstream" else self.kind

    @property
    def passes(self) -> int:
        """Forward-pass units per token: 3 for a training token, 1 for lm-eval's forward-only."""
        return FORWARD_PASSES if self.kind == "downstream" else TRAIN_PASSES

    @property
    def dataset(self) -> str:
        return self.run.dataset if self.finetune is None else self.finetune.target_dataset

    @property
    def tokenizer(self) -> str:
        return self.run.tokenizer if self.finetune is None else self.finetune.tokenizer

    @property
    def recipe(self) -> ModelRecipe:
        euler_steps = None if self.finetune is None else self.finetune.euler_steps
        return ModelRecipe(self.run, euler_steps=euler_steps)

    @property
    def family(self) -> str:
        """The model's family: a DiffEqFormer fine-tune's is its discretised family."""
        return self.run.model.family if self.recipe.euler_steps is None else DISCRETE_FAMILIES[self.run.model.family]

    @property
    def num_layers(self) -> int:
        return self.run.model.num_layers if self.recipe.euler_steps is None else self.recipe.euler_steps

    @property
    def throughput_key(self) -> tuple[str, str, int]:
        return self.family, self.run.size, self.num_layers

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "run": to_dict(self.run),
            "finetune": None if self.finetune is None else to_dict(self.finetune),
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Workload:
        finetune = None if raw["finetune"] is None else FinetuneSpec.from_dict(raw["finetune"])
        return cls(raw["kind"], RunSpec.from_dict(raw["run"]), finetune)


def workloads(config: dict[str, Any]) -> dict[str, Workload]:
    """Every workload of a preset by id: its pretraining runs, memory probes, fine-tunes and downstream runs (each
    pretrained run of ``downstream.pairs`` once)."""
    runs = pretrain_runs(config)
    rows = [Workload("pretrain", spec) for spec in runs.values()]
    rows += [Workload("probe", spec) for spec in memory_probes(config).values()]
    rows += [Workload("finetune", runs[spec.source_run], spec) for spec in finetune_runs(config).values()]
    rows += [Workload("downstream", runs[run_id]) for pair in config["downstream"]["pairs"].values() for run_id in pair]
    return {workload.run_id: workload for workload in rows}


def vocab_size(config: dict[str, Any], tokenizer: str) -> int:
    """Vocabulary of a preset tokenizer: GPT-2's 50257, Llama-2's 32000, or a trained BPE's ``vocab_size``."""
    from pipeline.config.families import GPT2_VOCAB, LLAMA_VOCAB

    pretrained = {"gpt2": GPT2_VOCAB, "NousResearch/Llama-2-7b-hf": LLAMA_VOCAB}
    spec = config["tokenizers"][tokenizer]
    if spec["kind"] == "bpe":
        return spec["vocab_size"]
    if spec["name"] not in pretrained:
        raise ValueError(
            f"key 'tokenizers.{tokenizer}.name' is {spec['name']!r}, whose vocabulary size the cost "
            f"preview does not know; expected one of {sorted(pretrained)}."
        )
    return pretrained[spec["name"]]


def workload_vocab_size(config: dict[str, Any], workload: Workload) -> int:
    """The vocabulary of the workload's tokenizer (a fine-tune's: its source run's)."""
    return vocab_size(config, workload.run.tokenizer)
