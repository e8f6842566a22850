"""The Euler time grid (``fidelity.time_grid``): the authors compute t_k = (k + 1)·dt in the compute dtype."""

import equinox as eqx
import haliax as hax
import jax
import jax.numpy as jnp
import jmp
import numpy as np
import pytest
from models_testkit import tiny_model

from pipeline.config import load_preset, pretrain_runs
from pipeline.models.time_embedding import grid_times

AUTHORS_BF16_TIMES_12 = [
    0.08349609375,
    0.1669921875,
    0.25,
    0.333984375,
    0.41796875,
    0.5,
    0.5859375,
    0.66796875,
    0.75,
    0.8359375,
    0.91796875,
    1.0,
]
"""bf16(bf16(k)·bf16(1/12)), k = 1..12: the authors' ``(arange(L) + 1) * dt`` in bfloat16."""
EXACT_BF16_TIMES_12 = [
    0.08349609375,
    0.1669921875,
    0.25,
    0.333984375,
    0.416015625,
    0.5,
    0.58203125,
    0.66796875,
    0.75,
    0.83203125,
    0.91796875,
    1.0,
]
"""bf16(k/12): one ulp from the authors' at k = 5, 7, 10."""


def test_reference_bf16_times_of_twelve_steps_are_the_authors():
    k = hax.arange(hax.Axis("layers", 12)) + 1
    reference = grid_times(k, 12, "reference", jnp.bfloat16)
    assert reference.dtype == jnp.bfloat16
    assert reference.array.astype(np.float32).tolist() == AUTHORS_BF16_TIMES_12
    exact = grid_times(k, 12, "exact", jnp.bfloat16).array.astype(jnp.bfloat16).astype(np.float32)
    assert exact.tolist() == EXACT_BF16_TIMES_12


@eqx.filter_jit
def _steps_and_block_at(field, t):
    """The arrays of the field's 12-step Euler solve (steps first), and of its block at time ``t``."""
    arrays = lambda tree: jax.tree_util.tree_leaves(eqx.filter(tree, eqx.is_array))  # noqa: E731
    return arrays(field.euler_blocks(12).stacked), arrays(field.at(t))


def test_a_model_in_bf16_generates_its_weights_at_the_authors_times():
    """Under mixed precision the field is cast to bf16; the weights of step k are those at the authors' bf16 t_k
    (k = 5 and 7 are one ulp from bf16(k/12), whose weights differ)."""
    field = jmp.get_policy("p=f32,c=bfloat16").cast_to_compute(tiny_model("diffeq").transformer.field)
    assert field.config.time_grid == "reference"
    for k in (5, 7):
        steps, authors = _steps_and_block_at(field, jnp.asarray(AUTHORS_BF16_TIMES_12[k - 1], jnp.bfloat16))
        _, exact = _steps_and_block_at(field, jnp.asarray(EXACT_BF16_TIMES_12[k - 1], jnp.bfloat16))
        assert all(np.array_equal(a[k - 1], b) for a, b in zip(steps, authors, strict=True))
        assert not all(np.array_equal(a[k - 1], b) for a, b in zip(steps, exact, strict=True))


@pytest.mark.parametrize("preset", ["tiny", "paper"])
def test_presets_train_their_diffeqformers_on_the_reference_grid(preset):
    runs = pretrain_runs(load_preset({"preset": preset}))
    assert {run.model.time_grid for run in runs.values() if run.model.family.startswith("diffeq")} == {"reference"}
    exact = pretrain_runs(load_preset({"preset": preset, "fidelity": {"time_grid": "exact"}}))
    assert {run.model.time_grid for run in exact.values() if run.model.family.startswith("diffeq")} == {"exact"}
