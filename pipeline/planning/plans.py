"""XLA's per-device memory plan of one workload at one micro-batch, compiled on CPU (``pipeline.planning.fit``
searches the micro-batch with it).

The plans run in a child Python process, because JAX fixes the virtual device count when it starts: the first plan
of every workload of one device count in one process (one Levanter import), each further plan of the micro-batch
search in its own.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from pipeline.planning.grid import Workload


def per_device_bytes(tree) -> int:
    """Bytes one device holds of the abstract, sharded arrays of ``tree`` (each leaf's shard shape)."""
    import jax
    import numpy as np

    total = 0
    for leaf in jax.tree_util.tree_leaves(tree):
        if isinstance(leaf, jax.ShapeDtypeStruct):
            shape = leaf.shape if leaf.sharding is None else leaf.sharding.shard_shape(leaf.shape)
            total += int(np.prod(shape)) * leaf.dtype.itemsize
    return total


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


def plan_train_step(workload: Workload, vocab_size: int, micro_batch: int) -> dict[str, Any]:
    """XLA's per-device plan of ``workload``'s train step (a pretraining run, memory probe or fine-tune) with
    ``micro_batch`` examples per device per forward/backward, on this process's devices (all of them form the FSDP
    mesh)."""
    import equinox as eqx
    import jax
    import jax.random as jrandom
    import levanter
    from haliax import Axis
    from haliax.partitioning import round_axis_for_partitioning
    from levanter.models.lm_model import compute_next_token_loss

    from pipeline.models.checkpoint import run_model_config
    from pipeline.models.param_count import count_leaves
    from pipeline.train.setup import optimizer_config, trainer_config
    from pipeline.train.step_plan import abstract_train_step_plan, compiled_peak_bytes
    from pipeline.train.trainer import UndonatedTrainer

    train = dataclasses.replace(workload.train, micro_batch_size=micro_batch)
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
    return {
        "parameters": count_leaves(state.model),
        "trainable_parameters": count_leaves(state.trainable_model),
        "param_bytes": per_device_bytes(state.model),
        "replicated_param_bytes": sum(replicated_parameters(state.model).values()),
        "optimizer_bytes": per_device_bytes(state.opt_state),
        "temp_bytes": int(plan.temp_size_in_bytes),
        "total_bytes": compiled_peak_bytes(plan),
        "gpus": len(jax.devices()),
    }


def plan_downstream(workload: Workload, vocab_size: int, batch_size: int) -> dict[str, Any]:
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
    from pipeline.models.param_count import count_leaves
    from pipeline.train.step_plan import compiled_peak_bytes

    def is_abstract(leaf) -> bool:
        return isinstance(leaf, jax.ShapeDtypeStruct)

    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    spec = workload.run
    model = eqx.filter_eval_shape(run_model_config(spec).build, Axis("vocab", vocab_size), key=jax.random.PRNGKey(0))
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
    param_bytes = per_device_bytes(arrays)
    return {
        "parameters": count_leaves(arrays),
        "trainable_parameters": 0,
        "param_bytes": param_bytes,
        "replicated_param_bytes": param_bytes,
        "optimizer_bytes": 0,
        "temp_bytes": int(plan.temp_size_in_bytes),
        "total_bytes": compiled_peak_bytes(plan),
        "gpus": 1,
    }


def plan_workload(workload: Workload, vocab_size: int, micro_batch: int) -> dict[str, Any]:
    """The plan of one workload at ``micro_batch`` examples per device (downstream: requests per forward pass)."""
    planner = plan_train_step if workload.trains else plan_downstream
    return planner(workload, vocab_size, micro_batch)


def plans_in_subprocess(requests: list[tuple[Workload, int, int]], gpus: int) -> list[dict[str, Any]]:
    """``plan_workload(workload, vocab_size, micro_batch)`` of each request, in order, in one fresh Python process
    whose JAX sees ``gpus`` virtual CPU devices."""
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={gpus}".strip(),
    }
    payload = [[workload.to_dict(), vocab_size, micro_batch] for workload, vocab_size, micro_batch in requests]
    with tempfile.TemporaryDirectory(prefix="fit-") as scratch:
        todo, out = Path(scratch) / "requests.json", Path(scratch) / "plans.json"
        todo.write_text(json.dumps(payload))
        finished = subprocess.run(
            [sys.executable, "-m", "pipeline.planning.plans", str(todo), str(out)],
            env=env,
            capture_output=True,
            text=True,
        )
        if finished.returncode != 0:
            lines = finished.stderr.strip().splitlines() or ["no error message"]
            raise RuntimeError(f"planning on {gpus} virtual devices failed: {lines[-1]}")
        return json.loads(out.read_text())


def plan_main(argv: list[str]) -> None:
    """``python -m pipeline.planning.plans <requests-json> <out-json>``: the plans of ``[workload, vocab,
    micro-batch]`` requests (``pipeline.planning.fit.fit_rows``), one after another; each one's compiled programs
    are dropped before the next."""
    import jax

    requests, out = argv
    plans = []
    for raw, vocab_size, micro_batch in json.loads(Path(requests).read_text()):
        workload = Workload.from_dict(raw)
        try:
            plans.append(plan_workload(workload, vocab_size, micro_batch))
        except Exception as error:
            raise RuntimeError(
                f"{workload.run_id} at micro-batch {micro_batch}: {type(error).__name__}: {error}".replace("\n", " ")
            ) from error
        jax.clear_caches()
    Path(out).write_text(json.dumps(plans))


if __name__ == "__main__":
    plan_main(sys.argv[1:])
