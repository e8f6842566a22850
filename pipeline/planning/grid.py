"""A preset's grid, enumerated once: every job it trains, evaluates or analyses, as typed objects.

``Grid.load(config)`` expands the preset's run specs once (``pipeline.config``: the pretraining runs, and from them
the fine-tunes and memory probes) into ``Workload`` objects (``pipeline.planning.workloads``) and the per-run GPU
analyses; the workflow, job sizing, the cost preview, the fit table and the preflight read that one object.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from pipeline.config import RunSpec, finetune_runs, memory_probes, pretrain_runs
from pipeline.planning.workloads import Downstream, Finetuning, MemoryProbe, Pretraining, Workload

GPU_ANALYSES = ("spectra", "lyapunov", "frontier")
"""The per-run analyses of ``analysis.<name>.runs`` that run on a GPU, each its own verb."""


@dataclasses.dataclass(frozen=True)
class Analysis:
    """One per-run GPU analysis ``name`` (one of ``GPU_ANALYSES``, also its verb) of the pretrained run ``run``."""

    name: str
    run: RunSpec

    @property
    def run_id(self) -> str:
        return self.run.run_id


@dataclasses.dataclass(frozen=True, eq=False)
class Grid:
    """Every job of one resolved preset ``config``, by id: pretraining runs, memory probes, fine-tunes, downstream
    jobs (``downstream-<run>``, each run of ``downstream.pairs`` once) and the GPU analyses by name and run."""

    config: dict[str, Any]
    pretraining: dict[str, Pretraining]
    probes: dict[str, MemoryProbe]
    finetunes: dict[str, Finetuning]
    downstream: dict[str, Downstream]
    analyses: dict[str, dict[str, Analysis]]

    @classmethod
    def load(cls, config: dict[str, Any]) -> Grid:
        """The grid of ``config`` (a preset as ``load_preset`` resolves it), its runs enumerated once."""
        runs = pretrain_runs(config)
        finetunes = finetune_runs(config, runs)
        downstream = [Downstream(runs[run_id]) for pair in config["downstream"]["pairs"].values() for run_id in pair]
        return cls(
            config,
            {run_id: Pretraining(spec) for run_id, spec in runs.items()},
            {probe_id: MemoryProbe(spec) for probe_id, spec in memory_probes(config).items()},
            {run_id: Finetuning(runs[spec.source_run], spec) for run_id, spec in finetunes.items()},
            {job.run_id: job for job in downstream},
            {
                name: {run_id: Analysis(name, runs[run_id]) for run_id in config["analysis"][name]["runs"]}
                for name in GPU_ANALYSES
            },
        )

    @functools.cached_property
    def workloads(self) -> dict[str, Workload]:
        """Every workload by id: pretraining runs, memory probes, fine-tunes, downstream jobs, in that order."""
        return {**self.pretraining, **self.probes, **self.finetunes, **self.downstream}

    @property
    def training(self) -> dict[str, Workload]:
        """The jobs that train: pretraining runs and fine-tunes."""
        return {**self.pretraining, **self.finetunes}

    @property
    def costed(self) -> list[Workload]:
        """The workloads the cost preview counts: every one but the memory probes (a few steps each)."""
        return [workload for workload_id, workload in self.workloads.items() if workload_id not in self.probes]

    @property
    def runs(self) -> dict[str, RunSpec]:
        """The pretraining runs' specs by run id."""
        return {run_id: job.run for run_id, job in self.pretraining.items()}
