"""Snakemake on the tiny DAG's working directory, as its end-to-end tests call it: the CI profile, every job placed
on the Ray cluster at ``ray_address``, the compiled programs cached in the working directory."""

import shutil
import subprocess
from pathlib import Path

from cli_testkit import snakemake_in, venv_on_path

ROOT = Path(__file__).resolve().parents[2]


def snakemake(workdir: Path, ray_address: str, *args: str, config: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    env = {**venv_on_path(), "JAX_COMPILATION_CACHE_DIR": str(workdir / "jax-cache"), "RAY_AUTH_MODE": "disabled"}
    return subprocess.run(
        [
            *snakemake_in(workdir),
            "--profile",
            str(ROOT / "profiles" / "ci"),
            *args,
            "--config",
            f"ray={{address: '{ray_address}'}}",
            *config,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=4800,
    )


def build_tiny_dag(workdir: Path, data_workdir: Path, ray_address: str) -> subprocess.CompletedProcess:
    """The whole DAG and its report in ``workdir``, starting from the data ``data_workdir`` built with the same rules
    (its outputs and Snakemake's records of them, mtimes kept): the DAG builds only the rest of it."""
    for built in ("results/tiny/data", ".snakemake/metadata"):
        shutil.copytree(data_workdir / built, workdir / built)
    return snakemake(workdir, ray_address, "--report", "results/tiny/report.html", "--report-after-run")
