"""XLA's per-device memory plan of one workload, on CPU with virtual devices: a train step (``plan_train_step``) or
lm-eval's scoring forward pass (``plan_downstream``), the model built abstractly at its exact dimensions (nothing
allocated, downloaded or read from a checkpoint). Per device

    total = arguments + outputs + temporaries − donated (aliased) bytes      (``pipeline.train.step_plan``)

``python -m pipeline.planning.xla_plans`` plans the requests on its stdin (``pipeline.planning.fit`` runs it, one
process per virtual device count: JAX fixes the count when it starts).
"""

import dataclasses
import json
import math
import pickle
import sys
import tempfile
from pathlib import Path

from pipeline.planning.grid import Workload


def per_device_bytes(tree) -> int:
    """Bytes one device holds of the abstract, sharded arrays of ``tree`` (each leaf's shard shape)."""
    import jax

    return sum(
        math.prod(leaf.shape if leaf.sharding is None else leaf.sharding.shard_shape(leaf.shape)) * leaf.dtype.itemsize
        for leaf in jax.tree_util.tree_leaves(tree)
        if isinstance(leaf, jax.ShapeDtypeStruct)
    )


def replicated_parameters(model) -> dict[str, int]:
    """Bytes per device of each parameter of an abstract, laid-out ``model`` that no mesh axis shards (every
    device holds all of it), by its path in the model tree."""
    import jax

    replicated = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(model)[0]:
        if isinstance(leaf, jax.ShapeDtypeStruct) and leaf.sharding.is_fully_replicated:
            name = jax.tree_util.keystr(path).removesuffix("[<flat index 0>]")
            replicated[name] = math.prod(leaf.shape) * leaf.dtype.itemsize
    return replicated


def plan_columns(model, trainable, opt_state, plan) -> dict[str, int]:
    """A fit row's parameter counts and bytes per device (``measured.FitRow``) of a compiled ``plan`` whose state is
    the abstract, laid-out ``model``, its ``trainable`` part and ``opt_state`` (None: nothing)."""
    from pipeline.models.param_count import count_leaves
    from pipeline.train.step_plan import compiled_peak_bytes

    return {
        "parameters": count_leaves(model),
        "trainable_parameters": count_leaves(trainable),
        "param_bytes": per_device_bytes(model),
        "replicated_param_bytes": sum(replicated_parameters(model).values()),
        "optimizer_bytes": per_device_bytes(opt_state),
        "temp_bytes": int(plan.temp_size_in_bytes),
        "total_bytes": compiled_peak_bytes(plan),
    }


def plan_train_step(workload: Workload, micro_batch: int) -> dict[str, int]:
    """XLA's per-device plan of ``workload``'s train step (a pretraining run, memory probe or fine-tune) with
    ``micro_batch`` examples per device per forward/backward: the training loop's own ``UndonatedTrainer``
    (optimizer, mixed precision, FSDP mesh and axis mapping) on this process's devices. A fine-tune's model is its
    source's, passed through its own ``resample`` and ``trainable_filter`` (LoRA: optimizer state for the adapters
    and embeddings only)."""
    import equinox as eqx
    import jax.random as jrandom
    import levanter
    from haliax import Axis
    from haliax.partitioning import round_axis_for_partitioning
    from levanter.models.lm_model import compute_next_token_loss

    from pipeline.models.checkpoint import run_model_config
    from pipeline.train.setup import optimizer_config, trainer_config
    from pipeline.train.step_plan import abstract_train_step_plan
    from pipeline.train.trainer import UndonatedTrainer

    train, vocab_size = dataclasses.replace(workload.train, micro_batch_size=micro_batch), workload.known_vocab
    model_config = run_model_config(workload.run)
    with tempfile.TemporaryDirectory(prefix=f"{workload.run_id}-fit-") as scratch:
        config = trainer_config(workload.run_id, train, Path(scratch))
        levanter.initialize(config)
        with UndonatedTrainer(config, optimizer_config(train).build(train.steps), compute_next_token_loss) as trainer:
            model_key, training_key = jrandom.split(jrandom.PRNGKey(train.seed))
            Vocab = round_axis_for_partitioning(Axis("vocab", vocab_size), trainer.parameter_axis_mapping)

            def model_init():
                return workload.adapted(model_config.build(Vocab, key=model_key), model_key)

            trainable = workload.trainable_filter()
            is_trainable = True if trainable is None else trainable(eqx.filter_eval_shape(model_init))
            state, plan = abstract_train_step_plan(
                trainer,
                model_init,
                vocab_size,
                workload.run.model.seq_len,
                vocab_size - 1,
                training_key,
                is_trainable=is_trainable,
            )
    return plan_columns(state.model, state.trainable_model, state.opt_state, plan)


def plan_downstream(workload: Workload, batch_size: int) -> dict[str, int]:
    """XLA's plan of lm-eval's scoring forward pass on ``workload``'s run: the harness's ``LevanterLM`` over the
    model in the run's compute precision (as ``evaluate_downstream`` casts it), its jitted scoring function for
    ``batch_size`` requests at the full seq_len, on one device (the harness loads the model unsharded)."""
    import equinox as eqx
    import haliax as hax
    import jax
    import jax.numpy as jnp
    import jmp
    from haliax import Axis

    from pipeline.evaluate.harness import LevanterLM
    from pipeline.models.checkpoint import run_model_config

    def is_abstract(leaf) -> bool:
        return isinstance(leaf, jax.ShapeDtypeStruct)

    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    spec = workload.run
    model = eqx.filter_eval_shape(
        run_model_config(spec).build, Axis("vocab", workload.known_vocab), key=jax.random.PRNGKey(0)
    )
    model = eqx.filter_eval_shape(jmp.get_policy(spec.train.mixed_precision).cast_to_compute, model)
    lm = LevanterLM(model, None, batch_size=batch_size)
    arrays, static = eqx.partition(lm.model, is_abstract, is_leaf=is_abstract)
    arrays = jax.tree_util.tree_map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=device), arrays)
    rows = (batch_size, spec.model.seq_len)
    tokens = hax.NamedArray(
        jax.ShapeDtypeStruct(rows, jnp.int32, sharding=device), (Axis("batch", batch_size), lm.model.Pos)
    )
    targets = jax.ShapeDtypeStruct(rows, jnp.int32, sharding=device)
    scored = jax.ShapeDtypeStruct(rows, jnp.bool_, sharding=device)

    def score(arrays, tokens, targets, scored):
        return lm._scores(eqx.combine(arrays, static, is_leaf=is_abstract), tokens, targets, scored)

    # The harness's filter_jit takes concrete arrays only; an outer jit carries the abstract ones into it.
    plan = jax.jit(score).lower(arrays, tokens, targets, scored).compile().memory_analysis()
    return plan_columns(arrays, None, None, plan)


def plan_main() -> None:
    """``python -m pipeline.planning.xla_plans``: the plans of the ``(workload, micro-batch)`` requests pickled
    on stdin by ``plans_in_subprocess`` (this code's parent), one after another, printed as one JSON line; each one's
    compiled programs are dropped before the next."""
    import jax

    plans = []
    for workload, micro_batch in pickle.load(sys.stdin.buffer):
        try:
            planner = plan_train_step if workload.trains else plan_downstream
            plans.append(planner(workload, micro_batch))
        except Exception as error:
            raise RuntimeError(
                f"{workload.run_id} at micro-batch {micro_batch}: {type(error).__name__}: {error}".replace("\n", " ")
            ) from error
        jax.clear_caches()
    print(json.dumps(plans))


if __name__ == "__main__":
    plan_main()
