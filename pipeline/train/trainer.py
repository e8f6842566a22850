"""Levanter's ``Trainer`` with a train step that donates no buffers.

Levanter jits its train step with the incoming ``TrainerState`` donated (its buffers may hold the outputs). With
the pinned jaxlib 0.7.2 that donated step feeds AdamW wrong gradients once other jitted work runs between steps
(the loop's evaluations and hooks): its loss is right, but the gradient implied by AdamW's first moment is not
``jax.grad`` of that loss, batch and dropout key. Measured on the tiny GPT (CPU, f32): ~100% off after 10 steps
of an uninterrupted run; in a resumed run exact at its first step, then 2% off, 13% after five; without donation
< 1e-6 at every step (``tests/train/test_train_step.py``). An uninterrupted and a resumed run then trained
differently. XLA reports of the same kind: openxla/xla#45912 (donated buffers in jaxlib 0.7.2, CPU and GPU) and
jax-ml/jax#39625 (donated-output corruption on CUDA). The price is one more copy of the parameters and optimiser
state per device during a step, which ``pipeline.train.step_plan`` counts.
"""

from __future__ import annotations

from functools import cached_property, partial

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
