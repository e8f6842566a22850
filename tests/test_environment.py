"""The lock file is the single source of the pinned stack; pyproject agrees with it and nothing competes with it."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def lock_pins() -> dict[str, str]:
    lines = [line for line in (ROOT / "requirements.lock").read_text().splitlines() if line and line[0] != "#"]
    return dict(line.split("==") for line in lines)


def test_lock_pins_the_verified_stack():
    pins = {name.lower().replace("_", "-"): version for name, version in lock_pins().items()}
    expected = {"levanter": "1.2.dev1644", "haliax": "1.4.dev453", "jax": "0.7.2", "jaxlib": "0.7.2",
                "lm-eval": "0.4.13", "snakemake": "9.27.1", "torch": "2.13.0"}
    assert {name: pins.get(name) for name in expected} == expected
    for name in ("chex", "equinox", "optax", "ray", "snakemake-executor-plugin-slurm", "pandas", "seaborn", "pytest"):
        assert name in pins, name


def test_the_lock_is_the_only_environment():
    """No conda environment file beside the lock and no rule pointing at one."""
    assert not (ROOT / "environment.yml").exists()
    workflow_files = [ROOT / "workflow" / "Snakefile", *(ROOT / "workflow" / "rules").glob("*.smk")]
    assert [path.name for path in workflow_files if re.search(r"^\s+conda:", path.read_text(), re.M)] == []
    sources = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "pyproject.toml", *workflow_files,
               *(ROOT / "pipeline").rglob("*.py")]
    assert [path.name for path in sources if "environment.yml" in path.read_text()] == []


def test_pyproject_pins_agree_with_the_lock():
    pins = {name.lower().replace("_", "-"): version for name, version in lock_pins().items()}
    text = (ROOT / "pyproject.toml").read_text()
    for name, version in re.findall(r'"([A-Za-z0-9_.\-\[\]]+)==([^"]+)"', text):
        assert pins[name.split("[")[0]] == version, name
