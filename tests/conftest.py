import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def tiny_data_workdir(tmp_path_factory):
    """A Snakemake working directory where the real rules have built the tiny preset's WikiText-stand-in data
    (corpus, BPE tokenizer, Levanter cache)."""
    workdir = tmp_path_factory.mktemp("tiny-data")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "workflow" / "Snakefile"),
                             "--directory", str(workdir), "--profile", str(ROOT / "profiles" / "ci"),
                             "results/tiny/data/caches/wt103-bpe"], cwd=ROOT, capture_output=True, text=True,
                            env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return workdir
