"""Models of the reproduction, registered as Levanter ``LmConfig``s on import (docs/models.md): ``diffeq_gpt``,
``diffeq_llama`` (paper §4, App. C.6), the weight-sharing ``shared_gpt`` / ``shared_ode_gpt``, the resampled
``discrete_diffeq_gpt`` / ``discrete_diffeq_llama`` (§6.2), and Levanter's ``gpt2`` / ``llama`` baselines."""

from levanter.models.lm_model import LmConfig

from pipeline.config.families import DIFFEQ_FAMILIES, FAMILY_MODEL_CONFIGS, GPT_FAMILIES, LLAMA_FAMILIES
from pipeline.config.families import FAMILIES as FAMILIES

from .diffeq_gpt import DiffEqGptConfig as DiffEqGptConfig
from .diffeq_gpt import DiffEqGptLMHeadModel as DiffEqGptLMHeadModel
from .diffeq_llama import DiffEqLlamaConfig as DiffEqLlamaConfig
from .diffeq_llama import DiffEqLlamaLMHeadModel as DiffEqLlamaLMHeadModel
from .discretize import GPT_LORA_TARGETS as GPT_LORA_TARGETS
from .discretize import LLAMA_LORA_TARGETS as LLAMA_LORA_TARGETS
from .discretize import LORA_INITS as LORA_INITS
from .discretize import DiscreteDiffEqGptConfig as DiscreteDiffEqGptConfig
from .discretize import DiscreteDiffEqGptLMHeadModel as DiscreteDiffEqGptLMHeadModel
from .discretize import DiscreteDiffEqLlamaConfig as DiscreteDiffEqLlamaConfig
from .discretize import DiscreteDiffEqLlamaLMHeadModel as DiscreteDiffEqLlamaLMHeadModel
from .discretize import discretize as discretize
from .discretize import init_lora as init_lora
from .init import build_initialised as build_initialised
from .param_count import baseline_param_counts as baseline_param_counts
from .param_count import count_params as count_params
from .param_count import table6_param_counts as table6_param_counts
from .shared_gpt import SharedGptConfig as SharedGptConfig
from .shared_gpt import SharedOdeGptConfig as SharedOdeGptConfig
from .time_embedding import TIME_GRIDS

LLAMA_LAYERS = {
    "reference": dict(chained_norms=True, norm_shift=True, layer_norm_epsilon=1e-6, final_norm_epsilon=1e-5),
    "levanter": dict(chained_norms=False, norm_shift=False, layer_norm_epsilon=1e-5, final_norm_epsilon=1e-5),
}
"""DiffEqFormer-Llama's layer (preset key ``fidelity.llama_layer``): the authors' (docs/paper.md#llama-layer: chained
norms, RMSNorm with scale and shift, eps 1e-6 in the layer, 1e-5 in the final norm) or Levanter's Llama layout
(norms side by side, scale only, eps 1e-5 everywhere)."""


def build_model_config(
    family: str,
    *,
    seq_len: int,
    hidden_dim: int,
    num_heads: int,
    num_layers: int,
    intermediate_dim: int | None = None,
    dropout: float | None = None,
    time_embed_dim: int | None = None,
    sinusoidal_dim: int | None = None,
    shared_time_mlp: bool | None = None,
    time_precision: str | None = None,
    time_grid: str | None = None,
    llama_layer: str | None = None,
) -> LmConfig:
    """The Levanter model config of one family and dimensions. ``dropout``: GPT families only (Llama accepts 0);
    ``intermediate_dim``: Llama SwiGLU width (default 4·hidden_dim); D, S, ``shared_time_mlp``, ``time_precision``,
    ``time_grid``: DiffEqFormer families; ``llama_layer``: DiffEqFormer-Llama. Unused options are rejected."""
    if family not in FAMILIES:
        raise ValueError(f"Unknown model family {family!r}; valid names are: {', '.join(FAMILIES)}.")
    time_options = {
        "time_embed_dim": time_embed_dim,
        "sinusoidal_dim": sinusoidal_dim,
        "shared_time_mlp": shared_time_mlp,
        "time_precision": time_precision,
        "time_grid": time_grid,
    }
    time_options = {name: value for name, value in time_options.items() if value is not None}
    if family not in DIFFEQ_FAMILIES and time_options:
        unused = ", ".join(sorted(time_options))
        raise ValueError(f"Model family {family!r} has no time embedding; drop {unused}.")
    if time_grid is not None and time_grid not in TIME_GRIDS:
        raise ValueError(f"fidelity.time_grid must be one of {TIME_GRIDS}, got {time_grid!r}.")
    if family in GPT_FAMILIES and intermediate_dim is not None:
        raise ValueError(f"Model family {family!r} sizes its MLP by mlp_scale, not intermediate_dim.")
    if llama_layer is not None and family != "diffeq_llama":
        raise ValueError(f"Model family {family!r} has no DiffEqFormer-Llama layer; drop llama_layer.")
    if llama_layer is not None and llama_layer not in LLAMA_LAYERS:
        raise ValueError(f"fidelity.llama_layer must be one of {tuple(LLAMA_LAYERS)}, got {llama_layer!r}.")
    if family in LLAMA_FAMILIES and dropout:
        raise ValueError(f"Model family {family!r} has no dropout; got dropout={dropout}.")

    dimensions = dict(seq_len=seq_len, hidden_dim=hidden_dim, num_heads=num_heads, num_layers=num_layers)
    if family in GPT_FAMILIES:
        p = 0.0 if dropout is None else dropout
        dimensions.update(resid_pdrop=p, embed_pdrop=p, attn_pdrop=p)
    else:
        ff = 4 * hidden_dim if intermediate_dim is None else intermediate_dim
        dimensions.update(intermediate_dim=ff, num_kv_heads=num_heads)

    if family == "diffeq_llama":
        dimensions.update(LLAMA_LAYERS[llama_layer or "reference"])
    return LmConfig.get_choice_class(FAMILY_MODEL_CONFIGS[family])(**dimensions, **time_options)
