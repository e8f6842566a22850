"""Parameter counts from shapes alone (``eqx.filter_eval_shape``, no allocation): paper Tables 3 and 6."""

import math

import equinox as eqx
import jax
from haliax import Axis
from levanter.models.gpt2 import Gpt2Config
from levanter.models.llama import LlamaConfig
from levanter.models.lm_model import LmConfig

from pipeline.config.families import GPT2_VOCAB, LLAMA_VOCAB

from .diffeq_gpt import DiffEqGptConfig

TABLE6_TIME_EMBED_DIMS = (20, 48, 72, 96, 120, 144)


def count_leaves(tree) -> int:
    """Total size of the array leaves of a pytree (arrays or ``jax.ShapeDtypeStruct``s)."""
    leaves = jax.tree_util.tree_leaves(tree)
    return sum(math.prod(leaf.shape) for leaf in leaves if isinstance(leaf, jax.Array | jax.ShapeDtypeStruct))


def count_params(config: LmConfig, vocab_size: int) -> int:
    """Number of parameters of ``config.build(Vocab)`` computed from its shapes."""
    shapes = eqx.filter_eval_shape(config.build, Axis("vocab", vocab_size), key=jax.random.PRNGKey(0))
    return count_leaves(shapes)


def gpt_large_diffeq_config(time_embed_dim: int) -> DiffEqGptConfig:
    """DiffEqFormer of GPT-large dimensions (hidden 1280, 20 heads, 36 steps, seq 1024), S = 128 (App. D.1)."""
    return DiffEqGptConfig(
        seq_len=1024, hidden_dim=1280, num_layers=36, num_heads=20, time_embed_dim=time_embed_dim, sinusoidal_dim=128
    )


def table6_param_counts() -> dict[int, int]:
    """Paper Table 6: parameters of the GPT-large-shaped DiffEqFormer for each D in ``TABLE6_TIME_EMBED_DIMS``."""
    return {d: count_params(gpt_large_diffeq_config(d), GPT2_VOCAB) for d in TABLE6_TIME_EMBED_DIMS}


def baseline_param_counts() -> dict[str, int]:
    """Paper Table 3's baselines as Levanter builds them (paper: 117M, 345M, 762M, 1213M): GPT-2 small/medium/large
    (tied, 1024 positions, vocab 50257), Llama-1B (hidden 2048, FF 8192, 16 heads, 16 layers, untied, vocab 32000)."""
    gpt = {
        "gpt-small": Gpt2Config(seq_len=1024, hidden_dim=768, num_layers=12, num_heads=12),
        "gpt-medium": Gpt2Config(seq_len=1024, hidden_dim=1024, num_layers=24, num_heads=16),
        "gpt-large": Gpt2Config(seq_len=1024, hidden_dim=1280, num_layers=36, num_heads=20),
    }
    counts = {name: count_params(config, GPT2_VOCAB) for name, config in gpt.items()}
    llama = LlamaConfig(
        seq_len=2048, hidden_dim=2048, intermediate_dim=8192, num_layers=16, num_heads=16, num_kv_heads=16
    )
    counts["llama-1b"] = count_params(llama, LLAMA_VOCAB)
    return counts
