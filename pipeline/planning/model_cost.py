"""Parameters and forward FLOPs per token of every model recipe a preset plans, counted once per model code and
cached (``MODEL_COST_CACHE``): what the cost preview and job sizing charge each workload."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from pipeline.config import REPO_ROOT
from pipeline.planning.grid import ModelRecipe, Workload, vocab_size

MODEL_COST_CACHE = REPO_ROOT / ".cache" / "model-cost.json"
"""(parameters, forward FLOPs per token) per model recipe, computed once: counting them builds Levanter configs,
which imports JAX and Levanter (~9 s), and the SLURM profile sizes every job from them each time Snakemake reads
the workflow (``pipeline.planning.jobs``: a dry run, and every submitted job on its node)."""


def model_code_version() -> str:
    """What the cached counts depend on besides the recipe: the model code, ``ModelRecipe.build``'s module and the
    Levanter/Haliax versions."""
    from importlib.metadata import version

    digest = hashlib.sha256(f"levanter {version('levanter')} haliax {version('haliax')}".encode())
    models = REPO_ROOT / "pipeline" / "models"
    sources = [
        *models.glob("*.py"),
        REPO_ROOT / "pipeline" / "config" / "families.py",
        Path(__file__).with_name("grid.py"),
    ]
    for path in sorted(sources):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def model_cost(workload: Workload, config: dict[str, Any]) -> tuple[int, float]:
    """(parameters, forward FLOPs per token) of a workload's Levanter ``LmConfig`` with its tokenizer's vocabulary."""
    return recipe_cost(workload.recipe, vocab_size(config, workload.tokenizer))


@functools.cache
def recipe_cost(recipe: ModelRecipe, vocab: int) -> tuple[int, float]:
    """(parameters, forward FLOPs per token) of a model recipe, parameters from shapes only; read from
    ``MODEL_COST_CACHE`` when it holds the recipe under the same model code, else computed and added (written
    atomically: parallel jobs may race, the last writer wins and a lost entry is recomputed)."""
    cache = read_model_costs()
    key = recipe.key(vocab)
    if key not in cache:
        from pipeline.artifacts import atomic_write_json
        from pipeline.models import count_params

        config = recipe.build()
        cache[key] = [count_params(config, vocab), float(config.flops_per_token(vocab))]
        MODEL_COST_CACHE.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(MODEL_COST_CACHE, {"code": model_code_version(), "costs": cache})
    parameters, forward_flops = cache[key]
    return int(parameters), float(forward_flops)


@functools.cache
def read_model_costs() -> dict[str, list]:
    """The cached model costs of the current model code (a cache of other code, or none, reads as empty)."""
    try:
        cached = json.loads(MODEL_COST_CACHE.read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return cached["costs"] if cached.get("code") == model_code_version() else {}
