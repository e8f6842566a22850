"""XLA's memory plan of the loop's own train step, for the memory probes (Fig. 16) and the fit preview: per device,
arguments + outputs + temporaries − aliased (donated) bytes."""

from typing import Any


def compiled_peak_bytes(memory_analysis) -> int:
    """XLA's per-device plan of a compiled computation: arguments + outputs + temporaries − aliased (donated)."""
    return int(
        memory_analysis.argument_size_in_bytes
        + memory_analysis.output_size_in_bytes
        + memory_analysis.temp_size_in_bytes
        - memory_analysis.alias_size_in_bytes
    )


def causal_examples(tokens, eos_id: int, batch_axis):
    """Token rows → Levanter ``LmExample``s as the pretraining loader makes them (end-of-document segments,
    ignore index)."""
    import haliax as hax
    from levanter.data.text import DEFAULT_IGNORE_INDEX
    from levanter.models.lm_model import LmExample

    def example(row):
        return LmExample.causal(row, ignore_id=DEFAULT_IGNORE_INDEX, eos_id=eos_id)

    return hax.vmap(example, batch_axis)(tokens)


def _is_abstract(leaf) -> bool:
    import jax

    return isinstance(leaf, jax.ShapeDtypeStruct)


def lay_out_abstract(tree, mapping) -> Any:
    """The abstract (``ShapeDtypeStruct``) leaves of ``tree``, each carrying the sharding Haliax's ``mapping`` gives
    it; every other leaf becomes None."""
    import equinox as eqx
    import haliax as hax
    import jax
    from haliax.partitioning import infer_resource_partitions

    tree = eqx.filter(tree, _is_abstract, is_leaf=_is_abstract)
    shardings = infer_resource_partitions(tree, mapping, preserve_existing_shardings=False)

    def attach(sharding, leaf):
        if sharding is None:  # no array here (e.g. the optimizer state of a frozen parameter)
            return leaf
        if isinstance(leaf, hax.NamedArray):
            return hax.NamedArray(
                jax.ShapeDtypeStruct(leaf.array.shape, leaf.array.dtype, sharding=sharding), leaf.axes
            )
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding)

    return jax.tree_util.tree_map(
        attach, shardings, tree, is_leaf=lambda x: x is None or isinstance(x, jax.sharding.Sharding)
    )


def abstract_train_step_plan(
    trainer, model_init, vocab_size: int, seq_len: int, eos_id: int, key, *, is_trainable=True
):
    """``(state, memory_analysis)``: the ``trainer``'s train step compiled for an abstract state from
    ``model_init`` (shapes only, laid out by the trainer's axis mappings) and random tokens; no parameter array is
    allocated. ``state`` holds sharded ``ShapeDtypeStruct``s."""
    import equinox as eqx
    import haliax as hax
    import jax
    import jax.random as jrandom
    from haliax import Axis
    from haliax.partitioning import named_jit

    state_key, data_key = jrandom.split(key)
    state_shape = eqx.filter_eval_shape(
        trainer.initial_state, state_key, model_init=model_init, is_trainable=is_trainable
    )
    Pos = Axis("position", seq_len)

    def random_batch(key):
        tokens = hax.random.randint(key, (trainer.TrainBatch, Pos), 0, vocab_size)
        return causal_examples(tokens, eos_id, trainer.TrainBatch)

    batch_shape = eqx.filter_eval_shape(named_jit(random_batch, axis_resources=trainer.compute_axis_mapping), data_key)

    state_arrays, state_static = eqx.partition(state_shape, _is_abstract, is_leaf=_is_abstract)
    batch_arrays, batch_static = eqx.partition(batch_shape, _is_abstract, is_leaf=_is_abstract)

    def train_step(state_arrays, batch_arrays):
        state = eqx.combine(state_arrays, state_static, is_leaf=_is_abstract)
        batch = eqx.combine(batch_arrays, batch_static, is_leaf=_is_abstract)
        return trainer._jit_train_step_fn_no_hook(state, (batch,), {})

    # Haliax's named_jit takes concrete arrays only, so an outer jit (donating nothing, as the loop's
    # UndonatedTrainer) carries the abstract, sharded arguments into the same named_jit training calls.
    state = lay_out_abstract(state_arrays, trainer.parameter_axis_mapping)
    batch = lay_out_abstract(batch_arrays, trainer.compute_axis_mapping)
    lowered = jax.jit(train_step).lower(state, batch)
    return state, lowered.compile().memory_analysis()
