"""What one job asks of SLURM: its kind (``JobKind``), where it runs (``Placement``) and how much (``JobRequest``), as
``pipeline.planning.jobs`` sizes it.

A training job is warned ``signal_lead_s`` before its walltime ends (``--signal=URG@<lead>``), so that it saves a
checkpoint and stops. SLURM sends no warning whose lead reaches back to the job's start, so a job's lead is capped at
half its walltime: a job shorter than twice the site's lead (a preflight job, a short run) is warned half-way.
"""

from __future__ import annotations

import dataclasses
import enum


class JobKind(enum.StrEnum):
    """A kind of job, valued as the site file's ``slurm_extra`` keys name it: pretraining and fine-tunes
    (``TRAINING``); lm-eval, the GPU analyses and memory probes (``GPU``); corpus, tokenizer, token cache and fit
    (``CPU``)."""

    TRAINING = "training"
    GPU = "gpu"
    CPU = "cpu"

    @property
    def resumable(self) -> bool:
        """A training job: it trains at a ``micro_batch``, is warned ``signal_lead_s`` before its walltime ends and
        resumes from its checkpoint, so a run longer than its partition's limit is a chain of ``chunks`` jobs."""
        return self is JobKind.TRAINING

    @property
    def on_gpu(self) -> bool:
        """Runs on the GPU partition at a site with GPUs (else on the CPU partition)."""
        return self is not JobKind.CPU

    @property
    def partition_keys(self) -> tuple[str, str]:
        """The site file's keys of its partition and that partition's walltime limit."""
        return ("gpu_partition", "max_runtime_min") if self.on_gpu else ("cpu_partition", "cpu_max_runtime_min")


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where a kind of job runs at a site, as sbatch options: its partition, account, QoS, node constraint, further
    flags (the reservation, the site's extras for the kind), and a training job's walltime warning lead (0: none)."""

    partition: str
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    sbatch_flags: tuple[str, ...] = ()
    signal_lead_s: int = 0

    def flags(self, minutes: int | None = None) -> tuple[str, ...]:
        """The sbatch flags of a job of ``minutes`` walltime (None: not yet known, the lead uncapped): ``sbatch_flags``
        and the warning ``--signal=URG@<lead>``, the lead at most half the walltime (module docstring)."""
        if not self.signal_lead_s:
            return self.sbatch_flags
        lead = self.signal_lead_s if minutes is None else min(self.signal_lead_s, minutes * 60 // 2)
        return (*self.sbatch_flags, f"--signal=URG@{lead}")


@dataclasses.dataclass(frozen=True)
class JobRequest:
    """What one job asks for. Without a site (``placement`` None) a local job on this machine's CPU: ``gpus`` 0 and
    only ``micro_batch`` set; ``gpu_model`` only on a GPU partition that names one. ``minutes`` is the walltime
    granted to each SLURM job, ``needed_minutes`` the job's own estimate (None: not estimated) and ``chunks`` how
    many jobs of ``minutes`` a resumable training run takes, each resuming the previous one's checkpoint."""

    gpus: int = 0
    micro_batch: int | None = None
    placement: Placement | None = None
    gpu_model: str | None = None
    cpus: int | None = None
    mem_mb: int | None = None
    minutes: int | None = None
    needed_minutes: int | None = None
    chunks: int = 1

    @property
    def sbatch_flags(self) -> tuple[str, ...]:
        """The job's further sbatch flags, its walltime warning capped by its ``minutes`` (``Placement.flags``)."""
        return () if self.placement is None else self.placement.flags(self.minutes)

    def resources(self) -> dict:
        """The request under Snakemake's and the SLURM executor plugin's resource names (one node; ``needed_min``
        the job's own estimate, else its walltime), plus the pipeline's own (``micro_batch``, ``chunks``) that a
        rule's shell command reads."""
        values = {"gpu": self.gpus, "micro_batch": self.micro_batch}
        if self.placement is not None:
            values |= {
                "slurm_partition": self.placement.partition,
                "slurm_account": self.placement.account,
                "qos": self.placement.qos,
                "constraint": self.placement.constraint,
                "slurm_extra": " ".join(self.sbatch_flags),
                "nodes": 1,
                "gpu_model": self.gpu_model,
                "cpus_per_task": self.cpus,
                "mem_mb": self.mem_mb,
                "runtime": self.minutes,
                "needed_min": self.minutes if self.needed_minutes is None else self.needed_minutes,
                "chunks": self.chunks,
            }
        return values

    def for_preflight(self, minutes: int) -> JobRequest:
        """The request of the preflight job that stands for this job: granted ``minutes`` in one chunk (its need:
        those minutes); without a site (no walltime) this request as it is."""
        if self.minutes is None:
            return self
        return dataclasses.replace(self, minutes=minutes, needed_minutes=minutes, chunks=1)
