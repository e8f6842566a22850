"""What the training loop changes in the pinned Levanter (1.2.dev1644, ``requirements.lock``), each change for the
reason its docstring states; none reaches into Levanter's modules, each subclasses, wraps or replaces an attribute of
one object it built.

``UndonatedTrainer``, Levanter's ``Trainer`` with a train step that donates no buffers
(docs/runs.md#every-update-is-the-gradient-of-its-loss): with the pinned jaxlib 0.7.2, Levanter's donated step feeds
AdamW wrong gradients once other jitted work runs between steps (the loop's evaluations and hooks): its loss is right,
but the gradient implied by AdamW's first moment is not ``jax.grad`` of that loss, batch and dropout key. Measured on
the tiny GPT (CPU, f32): ~100% off after 10 steps of an uninterrupted run; in a resumed run exact at its first step,
then 2% off, 13% after five; without donation < 1e-6 at every step (``tests/train/test_train_step.py``). The price is
one more copy of the parameters and optimiser state per device during a step, which ``pipeline.train.step_plan``
counts.
"""

from __future__ import annotations

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
    """Levanter ``TaggedEvaluator``s over one held-out split: the periodic one (its first ``max_batches`` batches;
    all of it when None) and the final one (all of it), sharing one jitted evaluation step that every batch of every
    evaluation hits.

    Levanter 1.2 compiles that step up to four times per run otherwise: each ``TaggedEvaluator`` jits its own
    ``accum_for_batch`` (the two close over the same tags, tokenizer bytes, precision and axis mapping, so the final
    one can take the periodic one's), and ``evaluate`` starts its running means from bare scalars that the step
    returns as axis-less ``NamedArray``s, a second pytree that traces and compiles the step again on the second
    batch (``named_running_means``). Each trace and compile costs 0.8–1.3 s of a tiny job's CPU."""
    from levanter.eval import TaggedEvaluator

    eval_batch = trainer.config.EvalBatch
    periodic, final = (
        TaggedEvaluator(
            eval_batch,
            [(dataset, [split])],
            tokenizer,
            trainer.device_mesh,
            trainer.compute_axis_mapping,
            max_examples,
            mp=trainer.mp,
        )
        for max_examples in (None if max_batches is None else max_batches * eval_batch.size, None)
    )
    accumulate = periodic.accum_for_batch

    def accumulate_named(model, state, batch, tags):
        return accumulate(model, named_running_means(state), batch, tags)

    periodic.accum_for_batch = final.accum_for_batch = accumulate_named
    return periodic, final


def named_running_means(state):
    """``state`` with every bare array leaf as an axis-less ``NamedArray`` (the form Levanter's step returns)."""
    import haliax as hax
    import jax

    return jax.tree.map(
        lambda leaf: leaf if isinstance(leaf, hax.NamedArray) else hax.named(leaf, ()),
        state,
        is_leaf=lambda leaf: isinstance(leaf, hax.NamedArray),
    )


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
    """Make ``checkpointer`` call ``on_commit(<its step-N folder>)`` once each save is committed, after Levanter's
    own commit (its ``metadata.json``) and on the same thread (its async save's), for every save it makes: by
    steps, by time, forced. Levanter's ``Checkpointer`` offers no such hook; the loop writes the checksums there."""
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
