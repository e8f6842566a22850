"""Site settings of a SLURM cluster: the site file and its schema.

A site file (``profiles/slurm/site.example.yaml``, copied to the untracked ``profiles/slurm/site.yaml``) names the
cluster's partitions, account, GPU model and limits and the shared Hugging Face cache; nothing site-specific lives
in the tracked profile. It is checked against ``pipeline/config/site_schema.yaml``, as a preset against its schema.
Without a site (plain ``snakemake``) every job runs locally on the CPU; ``pipeline.planning.jobs`` sizes each job
at a site.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import yaml

from pipeline.config import REPO_ROOT, ConfigError
from pipeline.config.loading import check_schema
from pipeline.config.paths import PACKAGE_DIR

EXAMPLE = REPO_ROOT / "profiles" / "slurm" / "site.example.yaml"
SITE_SCHEMA = PACKAGE_DIR / "site_schema.yaml"


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

    @property
    def gpu_memory_bytes(self) -> int:
        return round(self.gpu_memory_gb * 1e9)


EXPANDED = ("hf_home", "results_dir")
"""Paths whose ``~`` and ``$VARIABLES`` are expanded when the site is loaded."""


def load_site(path: str | Path) -> Site:
    """The site file's ``site:`` mapping as a ``Site`` (``EXPANDED`` paths expanded); a missing file or a bad key
    fails with one sentence."""
    path = Path(path)
    if not path.is_absolute():
        path = REPO_ROOT / path
    if not path.is_file():
        raise FileNotFoundError(f"site settings {path} do not exist; copy {EXAMPLE} to it and set your cluster's "
                                "partitions, account, GPUs, walltime limit and shared Hugging Face cache.")
    document = yaml.safe_load(path.read_text()) or {}
    try:
        check_schema(document, SITE_SCHEMA, str(path))
    except ConfigError as error:
        raise ConfigError(f"{str(error).rstrip('.')} (every key is described in {EXAMPLE}).") from None
    site = document["site"]
    if site["gpu_model"] is not None and site["gpus_per_node"] == 0:
        raise ValueError(f"{path}: key 'site.gpu_model' is {site['gpu_model']!r} but 'site.gpus_per_node' is 0; "
                         "set gpu_model to null on a cluster without GPUs.")
    if site["offline_nodes"] and site["hf_home"] is None:
        raise ValueError(f"{path}: key 'site.hf_home' is null but 'site.offline_nodes' is true; set hf_home to a "
                         "Hugging Face cache on a filesystem every node sees (the prefetch fills it on the login "
                         "node, offline jobs read it), or set offline_nodes to false if compute nodes reach the hub.")
    expanded = {key: os.path.expanduser(os.path.expandvars(site[key])) for key in EXPANDED if site[key] is not None}
    return Site(**{**site, **expanded})
