"""Downstream evaluation (App. C.7, Tables 4-5; docs/experiments.md#downstream-evaluation): lm-evaluation-harness
on a trained run through ``LevanterLM``, lm-eval's ``TemplateLM`` over any Levanter causal LM of the pipeline
(DiffEqFormers as trained, L Euler steps). Request i = (context c, continuation y) is scored as

    log p(y | c) = Σ_j log softmax(f(c ⊕ y_<j))[y_j],   greedy = ∀j: argmax f(c ⊕ y_<j) = y_j,

on the window (c ⊕ y)[-(T+1):] (T = seq_len), alone in its row from position 0, so a score never depends on
batching. Importing registers the lm-eval model ``diffeqformer-run`` (``RunLM``)."""

import json
import logging
import math
import os
import time
from pathlib import Path

import equinox as eqx
import haliax as hax
import jax
import jax.numpy as jnp
import jmp
import numpy as np
from levanter.compat.hf_checkpoints import load_tokenizer
from levanter.layers.attention import AttentionMask
from levanter.utils.tree_utils import inference_mode
from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model
from lm_eval.evaluator import simple_evaluate
from lm_eval.utils import get_rolling_token_windows, handle_non_serializable, make_disjoint_window

from pipeline.artifacts import atomic_write_text, csv_text
from pipeline.evaluate import DOWNSTREAM_COLUMNS
from pipeline.evaluate.lm_eval_tasks import check_scored_output_types, resolve_tasks, tidy_rows
from pipeline.evaluate.task_sources import pin_task_datasets, recorded_source
from pipeline.models.checkpoint import load_run_model

logger = logging.getLogger(__name__)

MIN_BUCKET = 16
"""Shortest padded length: rows are padded to the next power of two ≥ this (at most seq_len), one compile each."""
RANDOM_SEED = 0
"""Seed of lm-eval's few-shot sampling and document order (every run sees the same few-shot examples)."""
BOOTSTRAP_ITERS = 1000
"""Bootstrap resamples for the standard error of the metrics that have no closed form (LAMBADA's perplexity;
accuracies have the analytic sqrt(p(1-p)/(n-1))); lm-eval's default 100 000 adds ~10 s per task on CPU."""


def _continuation_scores(model, tokens, targets, scored):
    """Per row: Σ of log p(target) over the scored positions and whether every scored target is the argmax."""
    logits = model(tokens, attn_mask=AttentionMask.causal())
    logits = logits.rearrange((*tokens.axes, model.Vocab)).array.astype(jnp.float32)
    logprobs = jax.nn.log_softmax(logits, axis=-1)
    target_logprobs = jnp.take_along_axis(logprobs, targets[..., None], axis=-1)[..., 0]
    greedy = jnp.argmax(logits, axis=-1) == targets
    return jnp.where(scored, target_logprobs, 0.0).sum(-1), jnp.where(scored, greedy, True).all(-1)


class LevanterLM(TemplateLM):
    """lm-eval's LM API over a Levanter ``LmHeadModel`` in inference mode, each request alone in a row; requests
    sorted by length, ``batch_size`` rows per pass, padded to the next power of two of the longest row."""

    def __init__(self, model, tokenizer, *, batch_size: int):
        super().__init__()
        self.model = inference_mode(model, True)
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self._scores = eqx.filter_jit(_continuation_scores)

    eot_token_id = property(lambda self: self.tokenizer.eos_token_id)
    max_length = property(lambda self: self.model.Pos.size)

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, **kwargs) -> list[int]:
        """Token ids as lm-eval's HF model makes them: by default with the tokenizer's own special tokens (a
        Llama tokenizer's BOS, none for GPT-2's), except when ``string`` already starts with the BOS text."""
        if add_special_tokens is None:
            bos = self.tokenizer.bos_token
            add_special_tokens = not (bos and string.startswith(bos))
        return self.tokenizer.encode(string, add_special_tokens=add_special_tokens)

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs) -> list[tuple[float, bool]]:
        """(log p(continuation | context), greedy) of each request ``(strings, context_ids, continuation_ids)``."""
        windows = [
            (list(context) + list(continuation))[-(self.max_length + 1) :] for _, context, continuation in requests
        ]
        order = sorted(range(len(requests)), key=lambda i: -len(windows[i]))
        results: list[tuple[float, bool]] = [(math.nan, False)] * len(requests)
        Batch = hax.Axis("batch", self.batch_size)
        started = time.perf_counter()
        for first in range(0, len(order), self.batch_size):
            rows = order[first : first + self.batch_size]
            longest = len(windows[rows[0]]) - 1
            Pos = self.model.Pos.resize(min(self.max_length, max(MIN_BUCKET, 1 << (longest - 1).bit_length())))
            tokens = np.full((Batch.size, Pos.size), self.eot_token_id, dtype=np.int32)
            targets = np.zeros_like(tokens)
            scored = np.zeros(tokens.shape, dtype=bool)
            for row, index in enumerate(rows):
                window = windows[index]
                length = len(window) - 1
                count = min(len(requests[index][2]), length)
                tokens[row, :length] = window[:-1]
                targets[row, :length] = window[1:]
                scored[row, length - count : length] = True
            sums, greedy = jax.device_get(self._scores(self.model, hax.named(tokens, (Batch, Pos)), targets, scored))
            for row, index in enumerate(rows):
                results[index] = (float(sums[row]), bool(greedy[row]))
            if not disable_tqdm and (first // self.batch_size) % 50 == 0:
                logger.info(
                    "scored %d/%d requests (%.1f s)", first + len(rows), len(order), time.perf_counter() - started
                )
        return results

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        """log p(text) of each request's whole text, in disjoint windows of seq_len tokens (lm-eval's rolling
        windows; the first token is conditioned on the end-of-text token)."""
        totals = []
        for (text,) in (request.args for request in requests):
            windows = get_rolling_token_windows(
                token_list=self.tok_encode(text),
                prefix_token=self.prefix_token_id,
                max_seq_len=self.max_length,
                context_len=1,
            )
            pieces = [(None, *make_disjoint_window(window)) for window in windows]
            totals.append(sum(score for score, _ in self._loglikelihood_tokens(pieces, disable_tqdm=True)))
        return totals

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        raise NotImplementedError(
            "LevanterLM scores log-likelihoods only; generation tasks are refused by "
            "check_scored_output_types before any model is loaded."
        )


@register_model("diffeqformer-run")
class RunLM(LevanterLM):
    """A trained run folder as an lm-eval model: its final checkpoint in the run's compute dtype with its tokenizer;
    ``batch_size`` is requests per forward pass, ``device`` JAX's to choose."""

    def __init__(self, run_dir: str, tokenizer: str, batch_size: int | str = 32, **_lm_eval_options):
        if not str(batch_size).isdigit():
            raise ValueError(
                f"--batch_size {batch_size}: the diffeqformer-run model takes a number of requests per "
                f"forward pass (e.g. 32), not lm-eval's 'auto'."
            )
        hf_tokenizer = load_tokenizer(tokenizer)
        self.spec, model = load_run_model(run_dir, len(hf_tokenizer))
        super().__init__(
            jmp.get_policy(self.spec.train.mixed_precision).cast_to_compute(model),
            hf_tokenizer,
            batch_size=int(batch_size),
        )


def evaluate_downstream(
    run_dir: str,
    tokenizer_dir: str,
    out_dir: str,
    *,
    pair: str,
    tasks: list[str],
    shots: list[int],
    task_dir: str | None,
    limit: int | None,
    batch_size: int,
    prefetched: list[str] = (),
) -> dict:
    """Evaluate one trained run (in its compute dtype) on lm-eval ``tasks`` for every few-shot count in ``shots``,
    datasets at the commits ``prefetched`` records. Writes ``lm_eval_<k>shot.json`` per k and ``downstream.csv``
    (``DOWNSTREAM_COLUMNS``); returns {"run_id", "rows", "seconds"}."""
    started = time.perf_counter()
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")  # the Ray worker's own root
    logging.getLogger("pipeline").setLevel(logging.INFO)
    os.environ["DISABLE_MULTIPROC"] = "1"  # lm-eval's bootstrap would fork this multithreaded (JAX) process
    manager = resolve_tasks(tasks, task_dir)
    if prefetched:
        pin_task_datasets(manager, recorded_source([Path(path) for path in prefetched]))
    check_scored_output_types(manager, tasks)
    lm = RunLM(run_dir, tokenizer_dir, batch_size)
    spec = lm.spec
    rows = []
    for k in shots:
        shot_started = time.perf_counter()
        results = simple_evaluate(
            model=lm,
            tasks=tasks,
            num_fewshot=k,
            limit=limit,
            task_manager=manager,
            log_samples=False,
            bootstrap_iters=BOOTSTRAP_ITERS,
            random_seed=RANDOM_SEED,
            numpy_random_seed=RANDOM_SEED,
            torch_random_seed=RANDOM_SEED,
            fewshot_random_seed=RANDOM_SEED,
        )
        results["config"]["model"] = spec.run_id
        atomic_write_text(
            Path(out_dir) / f"lm_eval_{k}shot.json",
            json.dumps(results, indent=2, default=handle_non_serializable) + "\n",
        )
        shot_rows = tidy_rows(results, run_id=spec.run_id, family=spec.model.family, pair=pair, shots=k)
        rows += shot_rows
        logger.info(
            "%s %d-shot (%.1f s): %s",
            spec.run_id,
            k,
            time.perf_counter() - shot_started,
            ", ".join(f"{r['task']} {r['metric']}={r['value']:.4f}±{r['stderr']:.4f}" for r in shot_rows),
        )
    atomic_write_text(Path(out_dir) / "downstream.csv", csv_text(rows, DOWNSTREAM_COLUMNS))
    return {"run_id": spec.run_id, "rows": len(rows), "seconds": round(time.perf_counter() - started, 1)}
