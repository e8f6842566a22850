"""Lint: the hooks of .pre-commit-config.yaml (ruff check, ruff format --check, snakefmt --check), run as a commit
runs them, on every file."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_pre_commit_hooks_pass_on_every_file(tmp_path):
    """The hooks' tools are this virtualenv's (``language: system``); pre-commit's own cache goes to ``tmp_path``."""
    result = subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "--all-files", "--show-diff-on-failure", "--color", "never"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "PRE_COMMIT_HOME": str(tmp_path),
        },
        timeout=300,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert [line.split("...")[0] for line in result.stdout.splitlines() if line.endswith("Passed")] == [
        "ruff check",
        "ruff format --check",
        "snakefmt --check",
    ], result.stdout
