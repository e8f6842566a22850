"""``python -m pipeline <verb>`` in a subprocess, as the tests run a job's command (``from cli_testkit import
pipeline_verb``: tests/ is on the tests' import path, as for tests/models/models_testkit.py)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def pipeline_verb(
    *args: str, cwd: Path = ROOT, env: dict[str, str] | None = None, timeout: int = 600
) -> subprocess.CompletedProcess:
    """``python -m pipeline <args>`` in ``cwd`` with this process's environment, Ray's token authentication off
    (``RAY_AUTH_MODE=disabled``) and ``env`` on top; its output captured as text, its exit status left to the
    caller."""
    return subprocess.run(
        [sys.executable, "-m", "pipeline", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "RAY_AUTH_MODE": "disabled", **(env or {})},
        timeout=timeout,
    )
