"""The lock file is the single source of the pinned stack: pyproject and environment.yml agree with it, and set-up
writes nothing outside the clone."""

import hashlib
import os
import re
import shutil
import subprocess
import sys

import yaml
from cli_testkit import ROOT


def lock_pins() -> dict[str, str]:
    lines = [line for line in (ROOT / "requirements.lock").read_text().splitlines() if line and line[0] != "#"]
    return dict(line.split("==") for line in lines)


def test_lock_pins_the_verified_stack():
    pins = {name.lower().replace("_", "-"): version for name, version in lock_pins().items()}
    expected = {
        "levanter": "1.2.dev1644",
        "haliax": "1.4.dev453",
        "jax": "0.7.2",
        "jaxlib": "0.7.2",
        "lm-eval": "0.4.13",
        "snakemake": "9.27.1",
        "torch": "2.13.0+cpu",
    }
    assert {name: pins.get(name) for name in expected} == expected
    for name in ("chex", "equinox", "optax", "ray", "snakemake-executor-plugin-slurm", "pandas", "seaborn", "pytest"):
        assert name in pins, name


def test_environment_yml_installs_python_and_the_locks_and_nothing_else():
    """The conda route: Python 3.11 from conda, then requirements.lock through pip with the same CPU torch index as
    setup_env.sh; any package it names itself is pinned as the lock pins it. No rule has a conda environment."""
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda, pip = environment["dependencies"][:-1], environment["dependencies"][-1]["pip"]
    assert conda == ["python=3.11", "pip"]
    assert re.search(r'requires-python = ">=3.11,<3.12"', (ROOT / "pyproject.toml").read_text())
    setup = (ROOT / "workflow" / "scripts" / "setup_env.sh").read_text()
    torch_index = re.search(r"PIPELINE_TORCH_INDEX-(https://[^}]+)}", setup).group(1)
    assert [line for line in pip if line.startswith("--")] == [f"--extra-index-url {torch_index}"]
    assert [line for line in pip if line.startswith("-r ")] == ["-r requirements.lock"]
    pins = lock_pins()
    named = dict(line.split("==") for line in pip if "==" in line)
    assert {name: pins.get(name) for name in named} == named
    assert pins["torch"].endswith("+cpu") and "torch" not in (ROOT / "requirements-cuda.lock").read_text()
    workflow_files = [ROOT / "workflow" / "Snakefile", *(ROOT / "workflow" / "rules").glob("*.smk")]
    assert [path.name for path in workflow_files if re.search(r"^\s+conda:", path.read_text(), re.M)] == []


def test_setup_never_writes_outside_the_clone_and_a_rerun_is_a_no_op(tmp_path):
    """Set-up in a copy of the clone whose venv stamp matches its locks (the venv is this test's own interpreter):
    it installs nothing, says so, and leaves ``HOME`` empty."""
    clone, home = tmp_path / "clone", tmp_path / "home"
    (clone / "workflow" / "scripts").mkdir(parents=True)
    (clone / ".venv" / "bin").mkdir(parents=True)
    home.mkdir()
    for name in ("requirements.lock", "requirements-cuda.lock", "pyproject.toml", "workflow/scripts/setup_env.sh"):
        shutil.copy(ROOT / name, clone / name)
    python = clone / ".venv" / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    locks = b"".join((ROOT / name).read_bytes() for name in ("requirements.lock", "pyproject.toml"))
    (clone / ".venv" / ".installed-lock").write_text(f"cpu {hashlib.sha256(locks).hexdigest()}\n")
    env = {key: value for key, value in os.environ.items() if key != "XDG_CONFIG_HOME"}
    result = subprocess.run(
        ["bash", str(clone / "workflow" / "scripts" / "setup_env.sh")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "HOME": str(home), "PIPELINE_ACCELERATOR": "cpu", "PYTHON": sys.executable},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert list(home.rglob("*")) == []
    assert "setup_env.sh: .venv already holds the cpu stack of these locks" in result.stdout
    assert "setup_env.sh: environment ready: .venv (levanter" in result.stdout


def test_pyproject_pins_agree_with_the_lock():
    pins = {name.lower().replace("_", "-"): version for name, version in lock_pins().items()}
    text = (ROOT / "pyproject.toml").read_text()
    for name, version in re.findall(r'"([A-Za-z0-9_.\-\[\]]+)==([^"]+)"', text):
        assert pins[name.split("[")[0]] == version, name
