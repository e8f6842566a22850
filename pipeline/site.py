"""Site settings of a SLURM cluster and the resources of every job, sized per run from the cost model.

A site file (``profiles/slurm/site.example.yaml``, copied to the untracked ``profiles/slurm/site.yaml``) names the
cluster's partitions, account, GPU model and limits and the shared Hugging Face cache; nothing site-specific lives
in the tracked profile. Without a site (plain ``snakemake``) every job runs locally on the CPU (``gpu=0``).

A training run (pretraining, fine-tune) gets the fewest GPUs of one node that

- hold its optimizer state: 16 bytes per parameter (f32 parameters, gradients and AdamW's two moments), at most
  half of each GPU's memory (the other half for activations), sharded across the GPUs, and
- finish within ``target_runtime_min``: wall-clock = GPU-hours × ``safety_factor`` / GPUs, with GPU-hours from
  ``pipeline.bench.cost`` (measured throughput where ``results/benchmarks/throughput-sizes-<device>.csv`` has the model,
  else FLOPs at ``mfu`` of the device's peak),

and divide its batch size (data parallelism); its walltime is that wall-clock plus ``STARTUP_MIN``, capped at the
site's ``max_runtime_min`` (a run that needs longer continues from its newest checkpoint when Snakemake retries
it), its host memory and CPUs ``mem_mb_per_gpu`` and ``cpus_per_gpu`` per GPU, always on one node.

That sizing counts no activations. Its ``micro_batch`` (examples per device per forward/backward, Levanter's
``per_device_parallelism``; 0: the whole per-device batch at once) comes from the fit table
``results/<preset>/fit.csv`` (``python -m pipeline fit --site ...``, ``pipeline.bench.fit``) where that table has the
job's row: planned for the run as the preset defines it now (``plan_key``), at the job's GPU count, of the site's GPU
memory and the share of it JAX reserves. A ``train.micro_batch_size`` the preset sets wins over the table. A job with
neither, or whose row fits at no micro-batch or is stale, stops the workflow before anything is submitted.

A memory probe (Fig. 16) measures one step of its whole batch, never accumulated: it gets one node's GPUs (the most
that divide its batch), and its fit row must say that batch fits there, else it stops the workflow too.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from pipeline.config import REPO_ROOT

GPU_MEMORY_FRACTION_ENV = "XLA_PYTHON_CLIENT_MEM_FRACTION"
DEFAULT_GPU_MEMORY_FRACTION = 0.9
"""Share of each GPU's memory that JAX's allocator reserves when a job starts. JAX's own default is 0.75, which would
leave 20 GB of an 80 GB GPU unused. Every Ray task runs with this value (``pipeline.runner``), and the fit table plans
against it. A value already set in the environment wins in both places."""


def gpu_memory_fraction() -> float:
    """The share of GPU memory a job's JAX may use (``DEFAULT_GPU_MEMORY_FRACTION`` unless the environment sets it)."""
    return float(os.environ.get(GPU_MEMORY_FRACTION_ENV, DEFAULT_GPU_MEMORY_FRACTION))


EXAMPLE = REPO_ROOT / "profiles" / "slurm" / "site.example.yaml"
STARTUP_MIN = 30
"""Minutes a training job spends before its first step and after its last: JAX compilation, opening the token
cache, loading or writing a checkpoint."""
ADAM_STATE_BYTES_PER_PARAMETER = 16
GPU_MEMORY_FOR_STATE = 0.5
CPU_JOBS = {
    "corpus": {"cpus_per_task": 8, "mem_mb": 32000, "runtime": 480},
    "tokenizer": {"cpus_per_task": 1, "mem_mb": 16000, "runtime": 60},
    "token_cache": {"cpus_per_task": 32, "mem_mb": 128000, "runtime": 720},
    "fit": {"cpus_per_task": 8, "mem_mb": 64000, "runtime": 720},
}
"""CPU jobs at paper scale (OpenWebText: ~40 GB of text, ~9 B tokens; the fit table: XLA compiles every run's train
step, 1–3 CPU-minutes each for the largest), capped by the site's CPU limits."""
GPU_ANALYSIS_RUNTIME_MIN = {"spectra": 60, "lyapunov": 60, "frontier": 240, "downstream": 60, "memory_probe": 60}
"""Walltime of the one-GPU analyses (the frontier: 2 solvers × 5 step counts over a validation split) and of a
memory probe (a few steps); ``downstream`` gets this plus its lm-eval GPU-hours × ``safety_factor``."""


@dataclasses.dataclass(frozen=True)
class Site:
    """One cluster's settings (see ``profiles/slurm/site.example.yaml`` for each key's meaning)."""

    account: str | None
    gpu_partition: str
    cpu_partition: str
    gpu_model: str | None
    gpus_per_node: int
    gpu_memory_gb: float
    cpus_per_gpu: int
    mem_mb_per_gpu: int
    cpu_max_cpus: int
    cpu_max_mem_mb: int
    max_runtime_min: int
    target_runtime_min: int
    device: str
    mfu: float
    safety_factor: float
    hf_home: str | None
    hf_endpoint: str | None

    @property
    def gpu_memory_bytes(self) -> int:
        return round(self.gpu_memory_gb * 1e9)


_OPTIONAL = {"account", "gpu_model", "hf_home", "hf_endpoint"}
_POSITIVE = {"gpu_memory_gb", "cpus_per_gpu", "mem_mb_per_gpu", "cpu_max_cpus", "cpu_max_mem_mb", "max_runtime_min",
             "target_runtime_min", "mfu", "safety_factor"}


def load_site(path: str | Path) -> Site:
    """The site file's ``site:`` mapping as a ``Site``; a missing file or a bad key fails with one sentence."""
    path = Path(path)
    if not path.is_absolute():
        path = REPO_ROOT / path
    if not path.is_file():
        raise FileNotFoundError(f"site settings {path} do not exist; copy {EXAMPLE} to it and set your cluster's "
                                "partitions, account, GPUs, walltime limit and shared Hugging Face cache.")
    raw = (yaml.safe_load(path.read_text()) or {}).get("site")
    fields = {field.name: field.type for field in dataclasses.fields(Site)}
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a mapping under the key 'site' (as in {EXAMPLE}).")
    for key in raw:
        if key not in fields:
            raise ValueError(f"{path}: unknown key 'site.{key}'; expected one of {sorted(fields)}.")
    for key in fields:
        if key not in raw:
            raise ValueError(f"{path}: key 'site.{key}' is missing; copy it from {EXAMPLE}.")
        value = raw[key]
        if value is None and key in _OPTIONAL:
            continue
        numeric = key in _POSITIVE or key == "gpus_per_node"
        if numeric and (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                        or value < (0 if key == "gpus_per_node" else 1e-9)):
            kind = "non-negative" if key == "gpus_per_node" else "positive"
            raise ValueError(f"{path}: key 'site.{key}' must be a {kind} number (got {value!r}).")
        if not numeric and not (isinstance(value, str) and value.strip()):
            raise ValueError(f"{path}: key 'site.{key}' must be a non-empty string (got {value!r}).")
    if raw["hf_home"] is not None:
        raw = {**raw, "hf_home": os.path.expanduser(os.path.expandvars(raw["hf_home"]))}
    if raw["hf_endpoint"] is not None and not raw["hf_endpoint"].startswith(("http://", "https://")):
        raise ValueError(f"{path}: key 'site.hf_endpoint' must be an http(s) URL (got {raw['hf_endpoint']!r}).")
    site = Site(**raw)
    if site.gpu_model is not None and site.gpus_per_node == 0:
        raise ValueError(f"{path}: key 'site.gpu_model' is {site.gpu_model!r} but 'site.gpus_per_node' is 0; "
                         "set gpu_model to null on a cluster without GPUs.")
    return site


def node_gpu_counts(batch_size: int, site: Site) -> list[int]:
    """The GPU counts a job on one node can use for data parallelism: those dividing ``batch_size``, ascending."""
    return [n for n in range(1, site.gpus_per_node + 1) if batch_size % n == 0]


def training_gpus(gpu_hours: float, parameters: int, batch_size: int, site: Site) -> int:
    """The fewest GPUs of one node (dividing ``batch_size``) that hold the optimizer state and finish within the
    target walltime; the most that divide ``batch_size`` when none does both."""
    counts = node_gpu_counts(batch_size, site)
    state_gb = ADAM_STATE_BYTES_PER_PARAMETER * parameters / 1e9
    for gpus in counts:
        fits = state_gb / gpus <= GPU_MEMORY_FOR_STATE * site.gpu_memory_gb
        if fits and training_minutes(gpu_hours, gpus, site) <= site.target_runtime_min:
            return gpus
    return counts[-1]


def training_minutes(gpu_hours: float, gpus: int, site: Site) -> int:
    """Walltime in minutes: GPU-hours × safety factor / GPUs, plus ``STARTUP_MIN``."""
    return math.ceil(gpu_hours * site.safety_factor / gpus * 60) + STARTUP_MIN


def _resource(job: Callable[[Any], dict[str, Any]], key: str) -> Callable[[Any], Any]:
    return lambda wildcards: job(wildcards)[key]


def slurm_allocation(environ: dict[str, str] | None = None) -> dict[str, int]:
    """The CPUs and GPUs of the SLURM job this process runs in (``SLURM_CPUS_PER_TASK``; ``CUDA_VISIBLE_DEVICES``,
    which SLURM sets to the allocated GPUs), for an embedded Ray that must not count the whole node's; empty
    outside a SLURM job."""
    environ = os.environ if environ is None else environ
    if "SLURM_JOB_ID" not in environ:
        return {}
    allocation = {}
    if environ.get("SLURM_CPUS_PER_TASK", "").isdigit():
        allocation["num_cpus"] = int(environ["SLURM_CPUS_PER_TASK"])
    if "CUDA_VISIBLE_DEVICES" in environ:
        allocation["num_gpus"] = len([d for d in environ["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()])
    return allocation


HUB_OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def export_site_environment(site: Site | None) -> None:
    """With a site cache (``hf_home``), every job reads the Hugging Face hub from it only: ``HF_HOME`` set, the hub
    and ``datasets`` offline (the ``prefetch`` rule, on the submit host, lifts the offline flags for itself). With a
    hub mirror (``hf_endpoint``), whatever reaches the hub reaches it there (``HF_ENDPOINT``)."""
    if site is not None and site.hf_home is not None:
        os.environ.update({"HF_HOME": site.hf_home, **HUB_OFFLINE_ENV})
    if site is not None and site.hf_endpoint is not None:
        os.environ["HF_ENDPOINT"] = site.hf_endpoint


class JobResources:
    """Each job's SLURM resources for one preset at one site; ``None`` as the site: local jobs on the CPU."""

    def __init__(self, config: dict[str, Any], site: Site | None, fit_table: str | Path | None = None,
                 preflight_table: str | Path | None = None):
        self.config = config
        self.site = site
        self.fit_table = fit_table
        self.preflight_table = preflight_table
        self._costs: dict[tuple[str, str], dict[str, Any]] = {}

    def resource_keys(self, gpu: bool, training: bool = False) -> list[str]:
        """The resources a rule declares: ``gpu`` only without a site; with one, also placement and limits; a
        training rule's also ``micro_batch``."""
        micro_batch = ["micro_batch"] if training else []
        if self.site is None:
            return ["gpu", *micro_batch]
        keys = ["slurm_partition", *(["slurm_account"] if self.site.account else []), "nodes", "gpu"]
        keys += ["gpu_model"] if gpu and self.site.gpu_model else []
        return keys + ["cpus_per_task", "mem_mb", "runtime", *micro_batch]

    def rule_resources(self, job: Callable[[Any], dict[str, Any]], gpu: bool,
                       training: bool = False) -> dict[str, Callable[[Any], Any]]:
        """A rule's ``resources:``: one callable of the job's wildcards per key of ``job(wildcards)``."""
        return {key: _resource(job, key) for key in self.resource_keys(gpu, training)}

    @functools.cached_property
    def _workloads(self) -> dict[tuple[str, str], Any]:
        from pipeline.bench.cost import downstream_workloads, finetune_workloads, pretrain_workloads

        return {(workload.stage, workload.run_id): workload
                for workload in pretrain_workloads(self.config) + finetune_workloads(self.config)
                + downstream_workloads(self.config)}

    @functools.cached_property
    def _measured(self) -> dict:
        """Measured training tokens/s per GPU of the site's device: the throughput table's, and over it this
        preset's preflight's (``pipeline.preflight.measured``)."""
        from pipeline.bench.cost import default_throughput_path, read_throughput
        from pipeline.config import pretrain_runs

        path = default_throughput_path(self.site.device)
        measured = read_throughput(path, self.site.device) if path.is_file() else {}
        if self.preflight_table is None:
            return measured
        from pipeline.preflight.measured import measured_throughput

        return {**measured, **measured_throughput(self.preflight_table, self.site.device, pretrain_runs(self.config))}

    def cost(self, stage: str, run_id: str) -> dict[str, Any]:
        """The cost preview's row of one run (``gpu_hours``, ``parameters``, ...) on the site's device."""
        from pipeline.bench.cost import cost_rows

        if (stage, run_id) not in self._costs:
            self._costs[stage, run_id] = cost_rows([self._workloads[stage, run_id]], self.site.device, self._measured,
                                                   self.site.mfu, self.config)[0]
        return self._costs[stage, run_id]

    def _placement(self, partition: str) -> dict[str, Any]:
        account = {"slurm_account": self.site.account} if self.site.account else {}
        return {"slurm_partition": partition, **account, "nodes": 1}

    def _gpu_job(self, gpus: int, runtime: int) -> dict[str, Any]:
        site = self.site
        if site.gpus_per_node == 0:
            return {**self._placement(site.cpu_partition), "gpu": 0, "cpus_per_task": site.cpu_max_cpus,
                    "mem_mb": site.cpu_max_mem_mb, "runtime": site.max_runtime_min}
        model = {"gpu_model": site.gpu_model} if site.gpu_model else {}
        return {**self._placement(site.gpu_partition), "gpu": gpus, **model, "cpus_per_task": site.cpus_per_gpu * gpus,
                "mem_mb": site.mem_mb_per_gpu * gpus, "runtime": min(runtime, site.max_runtime_min)}

    def training_gpu_count(self, stage: str, run_id: str) -> int:
        """The GPUs of a pretraining run or fine-tune at a site with GPUs (module docstring)."""
        row = self.cost(stage, run_id)
        return training_gpus(row["gpu_hours"], row["parameters"], self._workloads[stage, run_id].train.batch_size,
                             self.site)

    @functools.cached_property
    def _fit_rows(self) -> dict[tuple[str, int, int], dict[str, Any]]:
        from pipeline.bench.fit import job_key, read_fit_rows

        if self.fit_table is None or not Path(self.fit_table).is_file():
            return {}
        return {job_key(row): row for row in read_fit_rows(Path(self.fit_table))}

    @functools.cached_property
    def _fit_workloads(self) -> dict[str, Any]:
        from pipeline.bench.fit import workloads

        return workloads(self.config)

    def fit_row(self, run_id: str, gpus: int) -> dict[str, Any] | None:
        """The fit table's row of the job of ``run_id`` (a pretraining run, fine-tune or memory probe) on ``gpus``
        GPUs of the site's memory; ``None`` without one. A row planned for another spec of the run (its
        ``plan_key``) or another share of the GPU's memory is stale and stops the workflow in one sentence."""
        from pipeline.bench.fit import plan_key, workload_vocab_size

        row = self._fit_rows.get((run_id, gpus, self.site.gpu_memory_bytes))
        if row is None:
            return None
        workload = self._fit_workloads[run_id]
        usable = int(self.site.gpu_memory_bytes * gpu_memory_fraction())
        if row["plan_key"] != plan_key(workload, workload_vocab_size(self.config, workload)):
            raise ValueError(f"{self.fit_table}: the row of {run_id} on {gpus} GPU(s) was planned for another "
                             "model, batch or fine-tune of that run than the preset now defines; plan it again "
                             "(snakemake --profile slurm fit).")
        if row["usable_bytes"] != usable:
            raise ValueError(f"{self.fit_table}: the row of {run_id} on {gpus} GPU(s) was planned for "
                             f"{row['usable_bytes'] / 1e9:g} GB usable per GPU, but JAX now reserves {usable / 1e9:g} "
                             f"GB ({GPU_MEMORY_FRACTION_ENV}); plan it again (snakemake --profile slurm fit).")
        return row

    def micro_batch(self, stage: str, run_id: str, gpus: int) -> int:
        """Examples per device per forward/backward (0: the whole batch): the preset's ``train.micro_batch_size``
        where it sets one (an explicit choice wins), else the fit table's choice for this run at ``gpus`` GPUs of the
        site's memory; with neither, the job stops the workflow before anything is submitted (without a table to
        read: 0)."""
        train = self._workloads[stage, run_id].train
        if train.micro_batch_size is not None:
            per_gpu = train.batch_size // gpus
            if train.micro_batch_size > per_gpu or per_gpu % train.micro_batch_size:
                raise ValueError(f"run {run_id}: the preset's train.micro_batch_size {train.micro_batch_size} does not "
                                 f"divide its batch of {per_gpu} per GPU on the {gpus} GPU(s) the site gives it; set "
                                 f"a divisor of {per_gpu} (the fit table plans one: snakemake --profile slurm fit).")
            return train.micro_batch_size
        row = self.fit_row(run_id, gpus)
        if row is None:
            if self.fit_table is None:
                return 0
            raise ValueError(f"{self.fit_table}: no row for {run_id} on {gpus} GPU(s) of {self.site.gpu_memory_gb:g} "
                             "GB, so it would train its whole per-GPU batch at once; plan the runs first "
                             "(snakemake --profile slurm fit) or set its train.micro_batch_size in the preset.")
        if not row["fits"]:
            more = ("a node with more GPUs (gpus_per_node)" if gpus == self.site.gpus_per_node
                    else "more GPUs (a lower target_runtime_min)")
            raise ValueError(f"{self.fit_table}: run {run_id} does not fit in {self.site.gpu_memory_gb:g} GB per GPU "
                             f"on {gpus} GPU(s) even at micro-batch 1; give it {more} or GPUs with more memory "
                             "(gpu_memory_gb) in the site file, then rerun `fit`.")
        return int(row["micro_batch"])

    def training(self, stage: str, run_id: str, check_preflight: bool = True) -> dict[str, Any]:
        """A pretraining run or fine-tune: GPUs, walltime and memory from its size, its micro-batch from the fit
        table (module docstring); a pretraining run whose shape's preflight row is red stops the workflow
        (``check_preflight``, ``pipeline.preflight.measured.require_green``)."""
        if self.site is None:
            job = {"gpu": 0, "micro_batch": self._workloads[stage, run_id].train.micro_batch_size or 0}
        elif self.site.gpus_per_node == 0:
            job = {**self._gpu_job(0, 0), "micro_batch": self._workloads[stage, run_id].train.micro_batch_size or 0}
        else:
            gpus = self.training_gpu_count(stage, run_id)
            minutes = training_minutes(self.cost(stage, run_id)["gpu_hours"], gpus, self.site)
            job = {**self._gpu_job(gpus, minutes), "micro_batch": self.micro_batch(stage, run_id, gpus)}
        if check_preflight and stage == "pretrain" and self.preflight_table is not None:
            from pipeline.preflight.measured import require_green
            from pipeline.preflight.shapes import run_shape_id

            spec = self._workloads[stage, run_id].model.spec
            require_green(self.preflight_table, run_shape_id(spec, job), run_id)
        return job

    def memory_probe_gpu_count(self, probe_id: str) -> int:
        """A memory probe's GPUs at a site with GPUs: one node's, the most that divide its batch (module docstring)."""
        return node_gpu_counts(self._fit_workloads[probe_id].batch_size, self.site)[-1]

    def memory_probe(self, probe_id: str) -> dict[str, Any]:
        """A memory probe: one node's GPUs (``memory_probe_gpu_count``); its fit row must fit its whole batch there
        (module docstring)."""
        if self.site is None:
            return {"gpu": 0}
        gpus = self.memory_probe_gpu_count(probe_id) if self.site.gpus_per_node else 0
        if gpus == 0 or self.fit_table is None:
            return self._gpu_job(gpus, GPU_ANALYSIS_RUNTIME_MIN["memory_probe"])
        row = self.fit_row(probe_id, gpus)
        if row is None:
            raise ValueError(f"{self.fit_table}: no row for memory probe {probe_id} on {gpus} GPU(s) of "
                             f"{self.site.gpu_memory_gb:g} GB, so nothing says its whole batch fits there; plan it "
                             "first (snakemake --profile slurm fit).")
        if not row["fits_at_paper_batch"]:
            raise ValueError(f"{self.fit_table}: memory probe {probe_id} does not fit its whole batch of "
                             f"{row['batch_size']} on {gpus} GPU(s) of {self.site.gpu_memory_gb:g} GB, and a probe "
                             "measures one step of the whole batch (Fig. 16); give the site GPUs with more memory "
                             "(gpu_memory_gb) or more per node (gpus_per_node), then rerun `fit`.")
        return self._gpu_job(gpus, GPU_ANALYSIS_RUNTIME_MIN["memory_probe"])

    def gpu_analysis(self, rule: str, run_id: str) -> dict[str, Any]:
        """One GPU; ``downstream`` adds its lm-eval GPU-hours × safety factor to the walltime."""
        if self.site is None:
            return {"gpu": 0}
        minutes = GPU_ANALYSIS_RUNTIME_MIN[rule]
        if rule == "downstream" and self.site.gpus_per_node:
            minutes += math.ceil(self.cost("evaluate", run_id)["gpu_hours"] * self.site.safety_factor * 60)
        return self._gpu_job(1, minutes)

    def cpu(self, rule: str) -> dict[str, Any]:
        """A CPU job on the CPU partition, its paper-scale need capped by the site's CPU limits."""
        if self.site is None:
            return {"gpu": 0}
        need = CPU_JOBS[rule]
        return {**self._placement(self.site.cpu_partition), "gpu": 0,
                "cpus_per_task": min(need["cpus_per_task"], self.site.cpu_max_cpus),
                "mem_mb": min(need["mem_mb"], self.site.cpu_max_mem_mb),
                "runtime": min(need["runtime"], self.site.max_runtime_min)}
