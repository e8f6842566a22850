"""Initialisation schemes of every family, the preset key ``fidelity.init`` (docs/paper.md#initialisation).

- ``reference``: the authors' code: every ``Linear`` N(0, 0.02²), zero bias (time MLPs and projections too);
  GPT token/position embeddings 0.02·N(0,1)/0.01·N(0,1); Llama token embeddings N(0,1); F_b ~ 1e-4·N(0,1), norms'
  F_w, F_b = 0. DiffEqFormer-GPT's two norms share one key, DiffEqFormer-Llama's do not, as in their code.
- ``levanter``: the models' own ``init`` (fan-in truncated normals, projection calibrated to std-0.02 W(t)).
"""

import dataclasses

import equinox as eqx
import haliax as hax
import haliax.nn as hnn
import jax
from levanter.models.gpt2 import Gpt2Embeddings
from levanter.models.llama import LlamaEmbedding

from .diffeq_gpt import DiffEqGptLMHeadModel

INIT_SCHEMES = ("reference", "levanter")
LINEAR_STD = 0.02
GPT_TOKEN_STD = 0.02
GPT_POSITION_STD = 0.01
LLAMA_TOKEN_STD = 1.0


def redrawn(module, key, std: float):
    """``module`` with its ``weight`` redrawn from N(0, std²) in its dtype."""
    weight = module.weight
    return dataclasses.replace(module, weight=(hax.random.normal(key, weight.axes) * std).astype(weight.dtype))


def _reference_linear(linear: hnn.Linear, key) -> hnn.Linear:
    bias = None if linear.bias is None else hax.zeros_like(linear.bias)
    return dataclasses.replace(redrawn(linear, key, LINEAR_STD), bias=bias)


def _reference_embeddings(embeddings, key):
    k_token, k_position = jax.random.split(key)
    token_std = {Gpt2Embeddings: GPT_TOKEN_STD, LlamaEmbedding: LLAMA_TOKEN_STD}.get(type(embeddings))
    if token_std is None:
        raise TypeError(f"reference_init knows GPT-2 and Llama embeddings, not {type(embeddings).__name__}.")
    token = redrawn(embeddings.token_embeddings, k_token, token_std)
    if isinstance(embeddings, Gpt2Embeddings):
        position = redrawn(embeddings.position_embeddings, k_position, GPT_POSITION_STD)
        return dataclasses.replace(embeddings, token_embeddings=token, position_embeddings=position)
    return dataclasses.replace(embeddings, token_embeddings=token)


def reference_linears(tree, key):
    """``tree`` with every ``Linear`` weight redrawn from N(0, 0.02²) (its own key each) and its bias zeroed."""
    is_linear = lambda node: isinstance(node, hnn.Linear)  # noqa: E731
    nodes, treedef = jax.tree_util.tree_flatten(tree, is_leaf=is_linear)
    keys = jax.random.split(key, len(nodes))
    nodes = [_reference_linear(node, k) if is_linear(node) else node for node, k in zip(nodes, keys, strict=True)]
    return jax.tree_util.tree_unflatten(treedef, nodes)


def _shared_norm_init(model):
    """DiffEqFormer-GPT with its second norm's time MLP set to its first's: the authors' ``Block.init`` draws both
    time-dependent norms from one key, so they start identical (their F_w, F_b are zero either way)."""
    field = model.transformer.field if isinstance(model, DiffEqGptLMHeadModel) else None
    if field is None or field.ln_1.mlp is None:
        return model
    return eqx.tree_at(lambda tree: tree.transformer.field.ln_2.mlp, model, field.ln_1.mlp)


def reference_init(model, key):
    """``model`` with the reference initialisation of docs/paper.md#initialisation (same structure, new values)."""
    k_embed, k_linears = jax.random.split(key)
    model = _shared_norm_init(reference_linears(model, k_linears))
    return dataclasses.replace(model, embeddings=_reference_embeddings(model.embeddings, k_embed))


def build_initialised(config, Vocab, *, key, init: str):
    """``config.build(Vocab)`` initialised by ``init`` (one of ``INIT_SCHEMES``)."""
    if init not in INIT_SCHEMES:
        raise ValueError(f"fidelity.init must be one of {INIT_SCHEMES}, got {init!r}.")
    k_build, k_init = jax.random.split(key)
    model = config.build(Vocab, key=k_build)
    return reference_init(model, k_init) if init == "reference" else model
