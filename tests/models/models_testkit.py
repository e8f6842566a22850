"""Tiny shapes and jitted helpers shared by the model tests."""

import dataclasses
import functools

import equinox as eqx
import haliax as hax
import jax
import optax
from levanter.layers.attention import AttentionMask
from levanter.models.lm_model import LmExample, compute_next_token_loss

from pipeline.models import DIFFEQ_FAMILIES, build_model_config

VOCAB = hax.Axis("vocab", 64)
TINY_SHAPE = dict(seq_len=16, hidden_dim=32, num_heads=4, num_layers=3)
TINY_TIME = dict(time_embed_dim=8, sinusoidal_dim=8)


def tiny_config(family: str, **overrides):
    """A tiny config of ``family``; ``overrides`` change its shape or replace any other config field.

    ``initializer_range`` is 0.2 rather than GPT-2's 0.02 so that the tiny models' outputs depend visibly on
    every weight. Models are compiled once per distinct config (random init compiles slowly on CPU), so tests
    share these configs wherever they can.
    """
    shape = {**TINY_SHAPE, **(TINY_TIME if family in DIFFEQ_FAMILIES else {})}
    shape.update({name: overrides.pop(name) for name in list(overrides) if name in shape})
    config = build_model_config(family, **shape)
    return dataclasses.replace(config, **{"initializer_range": 0.2, **overrides})


INIT_PRNG = "rbg"
"""PRNG used for random initialisation in tests: on CPU, XLA compiles a tiny DiffEqFormer's init about 3x
faster with it than with the default threefry (~3 s instead of ~10 s). The model code is PRNG-agnostic."""


@eqx.filter_jit
def _build(config, key):
    return config.build(VOCAB, key=key)


def build(config, seed: int = 0):
    """``config.build`` for the tiny vocabulary, seeded under ``INIT_PRNG``; compiled once per config."""
    with init_prng():
        return _build(config, jax.random.PRNGKey(seed))


def init_prng():
    """Context for other random initialisations in tests (e.g. LoRA's): keys made inside use ``INIT_PRNG``."""
    return jax.default_prng_impl(INIT_PRNG)


@functools.cache
def tiny_model(family: str, seed: int = 0, **overrides):
    """The tiny model, built once per session (models are immutable, so tests can share them)."""
    return build(tiny_config(family, **overrides), seed)


def nodes_of(tree, node_type) -> list:
    """Every sub-module of ``tree`` that is a ``node_type``."""

    def is_node(node) -> bool:
        return isinstance(node, node_type)

    return [node for node in jax.tree_util.tree_leaves(tree, is_leaf=is_node) if is_node(node)]


def random_tokens(seed: int, Pos: hax.Axis, *batch: hax.Axis):
    return hax.random.randint(jax.random.PRNGKey(seed), (*batch, Pos), 0, VOCAB.size)


@eqx.filter_jit
def causal_logits(model, input_ids):
    """Logits under the causal mask, as a plain array."""
    return model(input_ids, AttentionMask.causal()).array


@eqx.filter_jit
def default_logits(model, input_ids):
    """Logits with no mask passed (the model's default), as a plain array."""
    return model(input_ids).array


@eqx.filter_jit
def causal_activations(model, input_ids):
    """Final hidden states under the causal mask, as a plain array."""
    return model.activations(input_ids, AttentionMask.causal()).array


def batch_example(seed: int, Pos: hax.Axis) -> LmExample:
    """A batch of 4 random causal LM examples."""
    Batch = hax.Axis("batch", 4)
    return hax.vmap(LmExample.causal, Batch)(random_tokens(seed, Pos, Batch))


def train(model, example, steps: int, trainable=eqx.is_inexact_array, learning_rate: float = 3e-3):
    """``steps`` Adam updates of the ``trainable`` part of ``model`` on one batch; returns (model, losses)."""
    optimizer = optax.adam(learning_rate)
    params, frozen = eqx.partition(model, trainable)
    params, non_float = eqx.partition(params, eqx.is_inexact_array)
    frozen = eqx.combine(frozen, non_float)
    state = optimizer.init(params)

    def loss_fn(params):
        return compute_next_token_loss(eqx.combine(params, frozen), example).array

    @eqx.filter_jit
    def step(params, state):
        loss, grads = eqx.filter_value_and_grad(loss_fn)(params)
        updates, state = optimizer.update(grads, state, params)
        return eqx.apply_updates(params, updates), state, loss

    losses = []
    for _ in range(steps):
        params, state, loss = step(params, state)
        losses.append(float(loss))
    return eqx.combine(params, frozen), losses
