"""Where the package's presets and schema are (package data) and the repository root (``results/``, task folders)."""

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
PRESET_DIR = PACKAGE_DIR / "presets"
"""The built-in presets, ``<name>.yaml``."""
SCHEMA_PATH = PACKAGE_DIR / "schema.yaml"
"""The JSON schema every preset is validated against."""
REPO_ROOT = PACKAGE_DIR.parent.parent
BENCHMARKS_DIR = REPO_ROOT / "results" / "benchmarks"
"""Measured tables and benchmark records (``results/benchmarks/``)."""
