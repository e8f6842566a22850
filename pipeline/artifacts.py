"""Run-folder files (docs/runs.md): atomic writes (a temporary sibling renamed), the metrics log's reading and resume
cut, provenance, and the one writer of non-pandas tables (``csv_text``, ``markdown_table``, ``text_table``)."""

import csv
import io
import json
import logging
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from pipeline.config import REPO_ROOT, RunSpec

TRACKED_PACKAGES = (
    "levanter haliax jax jaxlib equinox optax ray lm_eval snakemake torch transformers tokenizers datasets pandas "
    "seaborn numpy"
).split()
"""The packages whose versions ``provenance.json`` records."""


@contextmanager
def atomic_file(path: Path) -> Iterator[str]:
    """A new temporary file in ``path``'s folder for the block to write, renamed onto ``path`` when the block ends
    without an error, else removed. The file gets the permissions of a plainly created file (``mkstemp`` makes 0600
    files, which the other members of a cluster group could not read)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(handle)
    try:
        yield tmp
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and an atomic rename."""
    with atomic_file(path) as tmp:
        Path(tmp).write_text(text)


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def atomic_write_yaml(path: Path, obj: Any) -> None:
    atomic_write_text(path, yaml.safe_dump(obj, sort_keys=False))


def csv_text(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """``rows`` as CSV under ``columns`` (``\\n`` line ends); a missing key is an empty cell, an unknown key a
    ValueError. Not pandas: ``None`` stays empty, NaN ``nan`` (readers ``float()`` it), gapped integer columns stay
    integers."""
    stream = io.StringIO()
    writer = csv.DictWriter(stream, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return stream.getvalue()


def markdown_table(columns: Sequence[str], rows: Iterable[Sequence[str]], align: str = "") -> str:
    """A Markdown pipe table of cells already formatted, unpadded: the header, its rule and one line per row; no
    final line end. ``align``: one letter per column, ``l`` or ``r`` (``---:``); empty: every column left."""
    rule = "|" + "|".join("---:" if letter == "r" else "---" for letter in align or "l" * len(columns)) + "|"
    lines = ["| " + " | ".join(columns) + " |", rule]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines)


def text_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], align: str = "", rule: bool = False) -> str:
    """A fixed-width text table: each cell as ``str`` (None as ``-``), each column padded to its widest cell and
    aligned as ``markdown_table``'s ``align`` says, two spaces apart, no trailing blanks; under the header a dashed
    rule as long as it where ``rule``; no final line end."""
    lines = [list(columns), *(["-" if cell is None else str(cell) for cell in cells] for cells in rows)]
    for i, letter in enumerate(align or "l" * len(columns)):
        width = max(len(line[i]) for line in lines)
        for line in lines:
            line[i] = line[i].rjust(width) if letter == "r" else line[i].ljust(width)
    text = ["  ".join(line).rstrip() for line in lines]
    return "\n".join([text[0], *(["-" * len(text[0])] if rule else []), *text[1:]])


RENAMED_SUMMARY_KEYS = {"steps": "train_steps"}
"""Summary keys a run folder written by an older pipeline may still use, and their current names: pretraining
summaries wrote their optimizer updates as ``steps`` until 2026-11-27 (fine-tunes always wrote ``train_steps``)."""


def with_current_keys(summary: dict[str, Any]) -> dict[str, Any]:
    """A ``summary.json``'s fields under their current names (``RENAMED_SUMMARY_KEYS``): a run completed by an older
    pipeline reports as it is, neither retrained nor refused."""
    current = dict(summary)
    for old, new in RENAMED_SUMMARY_KEYS.items():
        if old in current and new not in current:
            current[new] = current.pop(old)
    return current


def folder_bytes(path: Path) -> int:
    """Bytes of the regular files under ``path``, nested folders included. A symbolic link is not followed: its
    target's bytes are where the target lives, not this folder's disk."""
    return sum(file.lstat().st_size for file in Path(path).rglob("*") if file.is_file() and not file.is_symlink())


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl``. A torn last line (a job killed mid-write) is dropped with a warning;
    a corrupt line before it is an error naming the file and line."""
    lines = [(number, line) for number, line in enumerate(path.read_text().splitlines(), 1) if line.strip()]
    records = []
    for number, line in lines:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if number == lines[-1][0]:
                logging.getLogger(__name__).warning(
                    "%s: line %d is torn (the job was killed while writing it); dropped.", path, number
                )
                continue
            raise ValueError(
                f"{path}: line {number} is not JSON; the metrics log is corrupt (move the run folder "
                f"aside to retrain the run)."
            ) from None
    return records


def resume_metrics(path: Path, resume_step: int) -> None:
    """Cut ``metrics.jsonl`` back for a run resuming after ``resume_step`` updates: drop training records of steps ≥
    ``resume_step`` (a training record's step is the update it reports) and evaluations of steps > ``resume_step``
    (an evaluation's step counts updates applied; all when 0), so the log reads as one uninterrupted run."""
    records = read_metrics(path) if path.exists() else []
    kept = [
        record
        for record in records
        if record["step"] < resume_step or (record["step"] == resume_step > 0 and "eval_loss" in record)
    ]
    atomic_write_text(path, "".join(json.dumps(record) + "\n" for record in kept))


def git_commit() -> dict[str, Any]:
    """The checkout's commit and whether it has uncommitted changes (None outside a git checkout)."""

    def git(*args: str) -> str | None:
        try:
            return subprocess.run(
                ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=True
            ).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return None

    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": git("rev-parse", "HEAD"), "dirty": None if status is None else bool(status)}


def ray_placement() -> dict[str, Any] | None:
    """Where Ray ran this task (cluster GCS address, node, job) and the CPUs its cluster counts (an embedded Ray in a
    SLURM job: the job's, ``pipeline.execution.job_env.slurm_allocation``), or None outside a Ray task."""
    import ray

    if not ray.is_initialized():
        return None
    context = ray.get_runtime_context()
    return {
        "gcs_address": context.gcs_address,
        "node_id": context.get_node_id(),
        "job_id": context.get_job_id(),
        "cluster_cpus": ray.cluster_resources().get("CPU"),
    }


def provenance(started: float, devices: list[str] | None = None) -> dict[str, Any]:
    versions = {}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "git": git_commit(),
        "packages": versions,
        "python": sys.version.split()[0],
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "devices": devices,
        "ray": ray_placement(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "started_unix": started,
        "wall_s": round(time.time() - started, 3),
    }


def read_run_spec(run_dir: str | Path) -> RunSpec:
    """The resolved ``RunSpec`` a run was trained with (its ``config.yaml``)."""
    path = Path(run_dir) / "config.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no run config; the run folder {run_dir} was not written by pipeline.train.")
    return RunSpec.from_dict(yaml.safe_load(path.read_text()))


def require_complete_checkpoint(run_dir: str | Path) -> None:
    """Fail fast without JAX or Levanter (a job's driver) unless ``run_dir`` holds a checkpoint with its
    ``metadata.json``; ``final_checkpoint`` picks the newest in the Ray task."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(f"{run_dir}/checkpoints")
    if not fs.glob(f"{root}/*/metadata.json"):
        raise missing_checkpoint(run_dir)


def missing_checkpoint(run_dir: str | Path) -> FileNotFoundError:
    """The error of a run folder without a complete checkpoint (a fine-tune's or analysis's source not trained)."""
    return FileNotFoundError(
        f"{run_dir}/checkpoints: no complete checkpoint (step-N/metadata.json); train the run first."
    )
