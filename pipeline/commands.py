"""Options shared by the stages' verbs (each stage declares its verbs in ``pipeline/<stage>/commands.py``)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_ray_options(parser: argparse.ArgumentParser, *, gpus: bool = False) -> None:
    """``--ray-address``/``--ray-num-cpus`` (and ``--gpus``) of a verb whose work runs as a Ray task."""
    parser.add_argument("--ray-address", default=None, help="existing Ray cluster ('auto' or host:port)")
    parser.add_argument("--ray-num-cpus", type=int, default=None, help="CPUs of the embedded local Ray")
    if gpus:
        parser.add_argument("--gpus", type=float, default=0, help="GPUs the Ray task asks for")


def absolute(*paths: Path) -> list[str]:
    """Paths as absolute strings: a worker of an existing Ray cluster runs in the cluster's directory, not ours."""
    return [str(Path(path).resolve()) for path in paths]
