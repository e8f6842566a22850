"""What the training loop changes in the pinned Levanter (``requirements.lock``); each change subclasses, wraps or
replaces an attribute of an object it built, never Levanter's modules.

``UndonatedTrainer`` donates no buffers: with jaxlib 0.7.2 Levanter's donated step feeds AdamW wrong gradients once
other jitted work runs between steps (docs/runs.md#every-update-is-the-gradient-of-its-loss;
``tests/train/test_train_step.py``). It costs one more copy of parameters and optimizer state per device."""

from collections.abc import Callable
from functools import cached_property, partial
from pathlib import Path

from haliax.partitioning import named_jit
from levanter.trainer import Trainer


class UndonatedTrainer(Trainer):
    """``Trainer`` whose jitted train steps (with and without jit hooks) donate nothing."""

    @cached_property
    def _jit_train_step_fn(self):
        return named_jit(
            self._train_step, axis_resources=self.parameter_axis_mapping, out_axis_resources=self.parameter_axis_mapping
        )

    @cached_property
    def _jit_train_step_fn_no_hook(self):
        return named_jit(
            partial(self._train_step, _no_hooks=True),
            axis_resources=self.parameter_axis_mapping,
            out_axis_resources=self.parameter_axis_mapping,
        )


def held_out_evaluators(trainer, dataset, split: str, tokenizer, max_batches: int | None):
    """Levanter ``TaggedEvaluator``s over one held-out split, periodic (first ``max_batches``; all when None) and
    final, sharing one jitted step. Otherwise Levanter 1.2 compiles it up to four times per run: each evaluator jits
    its own ``accum_for_batch``, and scalar running means retrace on the second batch (unless made axis-less
    ``NamedArray``s, the form Levanter's step returns); and it is ``eqx.filter_jit``, traced once: Haliax's
    ``named_jit`` traced it twice (once more by ``eval_shape``, for output shardings of scalar and per-tag means:
    ~0.5 s of CPU per tiny job)."""
    import equinox as eqx
    import haliax as hax
    import jax
    from levanter.eval import TaggedEvaluator

    eval_batch, mesh, mapping = trainer.config.EvalBatch, trainer.device_mesh, trainer.compute_axis_mapping
    periodic, final = (
        TaggedEvaluator(eval_batch, [(dataset, [split])], tokenizer, mesh, mapping, max_examples, mp=trainer.mp)
        for max_examples in (None if max_batches is None else max_batches * eval_batch.size, None)
    )
    accumulate = eqx.filter_jit(periodic.accum_for_batch.__wrapped__)

    def accumulate_named(model, state, batch, tags):
        named = jax.tree.map(
            lambda leaf: leaf if hax.is_named_array(leaf) else hax.named(leaf, ()), state, is_leaf=hax.is_named_array
        )
        return accumulate(model, named, batch, tags)

    periodic.accum_for_batch = final.accum_for_batch = accumulate_named
    return periodic, final


def trainer_checkpointer(trainer):
    """The ``Checkpointer`` the Trainer registered as a hook: its final save must be forced by hand, because
    Levanter wraps it in a ``LambdaCallback`` that drops ``force`` (no checkpoint at the last step otherwise)."""
    from levanter.checkpoint import Checkpointer

    for hook in trainer.hooks.hooks:
        owner = getattr(getattr(hook.fn, "fn", None), "__self__", None)
        if isinstance(owner, Checkpointer):
            return owner
    raise RuntimeError("Levanter's Trainer registered no Checkpointer hook; cannot save the final checkpoint.")


def after_each_save(checkpointer, on_commit: Callable[[Path], None]) -> None:
    """Make ``checkpointer`` call ``on_commit(<step-N folder>)`` after each committed save (by steps, time or
    force), on the save's thread; Levanter offers no such hook."""
    save = checkpointer.save_checkpoint

    def save_checkpoint(
        info, destination: str, commit_callback: Callable[[], None] | None = None, *, is_temporary: bool = False
    ):
        folder = Path(checkpointer.base_path) / destination

        def committed() -> None:
            on_commit(folder)
            if commit_callback is not None:
                commit_callback()

        return save(info, destination, commit_callback=committed, is_temporary=is_temporary)

    checkpointer.save_checkpoint = save_checkpoint
