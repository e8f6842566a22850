"""A SLURM cluster's site file (``profiles/slurm/site.yaml``, copied from ``site.example.yaml``; docs/cluster.md),
checked against ``site_schema.yaml`` as a preset against its schema. Without one every job runs locally."""

import dataclasses
import os
import re
from pathlib import Path

import yaml

from pipeline.config.loading import check_schema
from pipeline.config.paths import PACKAGE_DIR, REPO_ROOT

EXAMPLE = REPO_ROOT / "profiles" / "slurm" / "site.example.yaml"
SITE_SCHEMA = PACKAGE_DIR / "site_schema.yaml"
DEFAULT_CHUNK_STARTUP_MIN = 30
"""``chunk_startup_min`` of a site file that omits it: minutes of a paper-scale GPU job's compilation, token cache
and checkpoint load and save (the other optional key, ``cpu_max_runtime_min``, is ``None``: the GPU limit)."""


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
    offline_nodes: bool
    qos: str | None
    gpu_constraint: str | None
    cpu_constraint: str | None
    reservation: str | None
    slurm_extra: dict[str, str | None]
    signal_lead_s: int
    results_dir: str | None
    chunk_startup_min: float = DEFAULT_CHUNK_STARTUP_MIN
    cpu_max_runtime_min: int | None = None

    @property
    def gpu_memory_bytes(self) -> int:
        return round(self.gpu_memory_gb * 1e9)

    def partition_limit_min(self, partition: str) -> int:
        """The walltime limit of ``partition``: ``cpu_max_runtime_min`` on the CPU partition where the site sets it
        (and the partitions differ), else ``max_runtime_min``."""
        if partition == self.cpu_partition and self.cpu_max_runtime_min is not None:
            return self.cpu_max_runtime_min
        return self.max_runtime_min


def load_site(path: str | Path) -> Site:
    """The site file's ``site:`` mapping as a ``Site`` (``~`` and ``$VARIABLES`` of ``hf_home`` and ``results_dir``
    expanded); a missing file or a bad key fails with one sentence."""
    path = REPO_ROOT / path  # an absolute path as it is
    if not path.is_file():
        raise FileNotFoundError(
            f"site settings {path} do not exist; copy {EXAMPLE} to it and set your cluster's "
            "partitions, account, GPUs, walltime limit and shared Hugging Face cache."
        )
    document = yaml.safe_load(path.read_text()) or {}
    check_schema(document, SITE_SCHEMA, str(path), f" (every key is described in {EXAMPLE})")
    raw = document["site"]
    paths = {key: os.path.expanduser(os.path.expandvars(raw[key])) for key in ("hf_home", "results_dir") if raw[key]}
    site = Site(**{**raw, **paths})
    if site.gpu_model is not None and site.gpus_per_node == 0:
        raise ValueError(
            f"{path}: key 'site.gpu_model' is {site.gpu_model!r} but 'site.gpus_per_node' is 0; "
            "set gpu_model to null on a cluster without GPUs."
        )
    if site.offline_nodes and site.hf_home is None:
        raise ValueError(
            f"{path}: key 'site.hf_home' is null but 'site.offline_nodes' is true; set hf_home to a "
            "Hugging Face cache on a filesystem every node sees (the prefetch fills it on the login "
            "node, offline jobs read it), or set offline_nodes to false if compute nodes reach the hub."
        )
    if site.target_runtime_min > site.max_runtime_min:
        raise ValueError(
            f"{path}: key 'site.target_runtime_min' ({site.target_runtime_min}) exceeds 'site.max_runtime_min' "
            f"({site.max_runtime_min}), so no run could be sized to finish within it; set target_runtime_min to "
            "at most the GPU partition's MaxTime."
        )
    if site.chunk_startup_min >= site.max_runtime_min:
        raise ValueError(
            f"{path}: key 'site.chunk_startup_min' ({site.chunk_startup_min:g}) is not below 'site.max_runtime_min' "
            f"({site.max_runtime_min}), so a training job would never reach its first step; set it to the minutes "
            "a training job takes before its first step and after its last."
        )
    # The sbatch flags the SLURM executor plugin sets itself, refused here at load rather than at its first sbatch.
    from snakemake_executor_plugin_slurm.validation import get_forbidden_slurm_options

    for kind, flags in site.slurm_extra.items():
        for pattern in get_forbidden_slurm_options():
            if flags is not None and re.search(pattern, flags):
                flag = pattern.split("[")[0]
                raise ValueError(
                    f"{path}: key 'site.slurm_extra.{kind}' sets {flag}, which the SLURM executor "
                    "plugin sets itself from the other site keys and the job's resources; remove it."
                )
    return site


def preset_results(site: Site | None, preset: str) -> Path:
    """A preset's results folder, ``<root>/<preset>``: the root is the site's ``results_dir``, else (no site, or
    none set) the repository's ``results/``."""
    root = site.results_dir if site is not None and site.results_dir else REPO_ROOT / "results"
    return Path(root) / preset
