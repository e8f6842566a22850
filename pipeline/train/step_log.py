"""What the training loop logs after each update: the loss, the learning rate the step used, the throughput, and
every tenth step a progress line with an ETA; a NaN or infinite loss stops the run with a sentence."""

import logging
import math
import time

from pipeline.execution.phases import mark_phase

logger = logging.getLogger(__name__)


class NonFiniteLossError(ValueError):
    """Training produced a NaN or infinite loss; the run stops and says at which step (Levanter's own
    ``crash_on_nan`` is off so that this sentence, not a bare "Loss is NaN", reaches the user)."""


class StepLog:
    """A Levanter hook: one ``metrics.jsonl`` record per update (``loss``, ``lr``, ``tokens_per_s``, ``step_s``),
    once even if called twice for a step; the first update ends the ``compile`` phase."""

    def __init__(self, run_id: str, steps: int, tokens_per_step: int, start_step: int):
        self.run_id, self.steps, self.tokens_per_step, self.start_step = run_id, steps, tokens_per_step, start_step
        self.started = time.time()
        self.last_logged: int | None = None

    def __call__(self, info) -> None:
        import levanter

        if info.step == self.last_logged:
            return
        self.last_logged = info.step
        if info.step == self.start_step:
            mark_phase("train")
        loss = float(info.loss)
        if not math.isfinite(loss):
            raise NonFiniteLossError(
                f"{self.run_id}: training loss became {loss} at step {info.step}; "
                f"the run was stopped (lower lr or check the data)."
            )
        record = {
            "loss": loss,
            "lr": float(info.opt_state.hyperparams["learning_rate"]),  # the step's, as the step computed it
            "tokens_per_s": self.tokens_per_step / info.step_duration,
            "step_s": info.step_duration,
        }
        levanter.tracker.log(record, step=info.step)
        if info.step % 10 == 0 or info.step + 1 == self.steps:
            done = info.step + 1 - self.start_step
            eta = (time.time() - self.started) / done * (self.steps - info.step - 1)
            logger.info(
                "%s step %d/%d loss %.4f lr %.2e %.0f tok/s ETA %.0fs",
                self.run_id,
                info.step + 1,
                self.steps,
                loss,
                record["lr"],
                record["tokens_per_s"],
                eta,
            )
