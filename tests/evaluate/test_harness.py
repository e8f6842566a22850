"""The lm-eval adapter: per-request log-likelihoods equal transformers' in torch, whatever the batching; a
DiffEqFormer scores as its discretisation at the trained steps; task names fail fast; tidy rows."""

import math
import random

import numpy as np
import pytest
from conftest import SEQ_LEN, hf_model, torch_loglikelihoods

from pipeline.evaluate import DOWNSTREAM_COLUMNS
from pipeline.evaluate.harness import LevanterLM
from pipeline.evaluate.lm_eval_tasks import resolve_tasks, tidy_rows
from pipeline.models import discretize


def scores(lm, requests):
    return np.array([score for score, _ in lm.loglikelihood(requests, disable_tqdm=True)])


@pytest.mark.parametrize("family", ["gpt", "llama"])
def test_loglikelihoods_match_transformers_in_torch(family, random_model, tokenizer, requests, tmp_path):
    model = random_model(family)
    lm = LevanterLM(model, tokenizer, batch_size=8)
    lengths = [len(lm.tok_encode(context + continuation)) for context, continuation in (r.args for r in requests)]
    assert max(lengths) > SEQ_LEN + 1 and min(lengths) < SEQ_LEN // 2  # truncated windows and short ones
    ours = lm.loglikelihood(requests, disable_tqdm=True)
    reference = torch_loglikelihoods(hf_model(model, tokenizer, tmp_path / "hf"), lm, requests)
    ours_scores, reference_scores = np.array([s for s, _ in ours]), np.array([s for s, _ in reference])
    assert np.ptp(reference_scores) > 1.0
    assert np.abs(ours_scores - reference_scores).max() <= 1e-3
    assert [greedy for _, greedy in ours] == [greedy for _, greedy in reference]


def test_scores_do_not_depend_on_batch_composition(random_model, tokenizer, requests):
    lm_alone = LevanterLM(random_model("gpt"), tokenizer, batch_size=1)
    lm_batched = LevanterLM(random_model("gpt"), tokenizer, batch_size=8)
    shuffled = random.Random(0).sample(requests, len(requests))
    alone = dict(zip((r.args for r in requests), scores(lm_alone, requests), strict=True))
    batched = dict(zip((r.args for r in shuffled), scores(lm_batched, shuffled), strict=True))
    assert max(abs(alone[args] - batched[args]) for args in alone) <= 1e-5


def test_diffeqformer_scores_equal_its_discretisation_at_the_trained_steps(random_model, tokenizer, requests):
    """The GPT-based DiffEqFormer, as the grid scores; for DiffEqFormer-Llama, its discretisation's logits equal its
    own (test_discretize.py) and the harness scores a Llama as transformers does (above)."""
    model = random_model("diffeq")
    continuous_lm = LevanterLM(model, tokenizer, batch_size=8)
    # Requests filling the whole context only: one padded length, so one compilation per model.
    long_requests = [r for r in requests if len(continuous_lm.tok_encode("".join(r.args))) > SEQ_LEN]
    continuous = scores(continuous_lm, long_requests)
    discrete = scores(LevanterLM(discretize(model, model.config.num_layers), tokenizer, batch_size=8), long_requests)
    assert len(long_requests) >= 8 and np.ptp(continuous) > 1.0
    assert np.abs(continuous - discrete).max() <= 1e-3


def test_rolling_loglikelihood_of_a_short_text_is_its_loglikelihood_after_end_of_text(
    random_model, tokenizer, requests
):
    lm = LevanterLM(random_model("gpt"), tokenizer, batch_size=8)
    text = "A fool and his money are soon parted."
    (rolling,) = lm.loglikelihood_rolling(
        [type(requests[0])("loglikelihood_rolling", {}, (text,), 0)], disable_tqdm=True
    )
    assert rolling == pytest.approx(scores(lm, [type(requests[0])("loglikelihood", {}, ("", text), 0)])[0], abs=1e-5)


def test_unknown_task_name_fails_with_one_sentence_naming_it_and_the_folder(task_dir):
    with pytest.raises(ValueError) as error:
        resolve_tasks(["tiny_choice", "tiny_lambda"], task_dir)
    message = str(error.value)
    assert "'tiny_lambda'" in message and str(task_dir) in message and "'tiny_lambada'" in message
    assert message.count(". ") == 0 and message.endswith(".") and "\n" not in message


def test_missing_task_folder_fails_with_one_sentence(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"downstream.task_dir: .*missing is not a folder"):
        resolve_tasks(["tiny_choice"], tmp_path / "missing")


LM_EVAL_RESULTS = {
    "results": {
        "mmlu": {"alias": "mmlu", "acc,none": 0.25, "acc_stderr,none": 0.01},
        "mmlu_anatomy": {"alias": " - anatomy", "acc,none": 0.3, "acc_stderr,none": 0.04},
        "mmlu_virology": {"alias": " - virology", "acc,none": 0.2, "acc_stderr,none": 0.03},
        "lambada_openai": {
            "alias": "lambada_openai",
            "perplexity,none": 40.5,
            "perplexity_stderr,none": "N/A",
            "acc,none": 0.5,
            "acc_stderr,none": 0.007,
        },
    },
    "group_subtasks": {"mmlu": ["mmlu_anatomy", "mmlu_virology"], "lambada_openai": []},
    "n-samples": {
        "mmlu_anatomy": {"original": 135, "effective": 135},
        "mmlu_virology": {"original": 166, "effective": 166},
        "lambada_openai": {"original": 5153, "effective": 100},
    },
}


def test_tidy_rows_hold_every_metric_with_its_stderr_and_sample_count():
    rows = tidy_rows(LM_EVAL_RESULTS, run_id="owt-large-gpt", family="gpt", pair="gpt-large", shots=5)
    by_key = {(row["task"], row["metric"]): row for row in rows}
    assert set(by_key) == {
        ("mmlu", "acc"),
        ("mmlu_anatomy", "acc"),
        ("mmlu_virology", "acc"),
        ("lambada_openai", "perplexity"),
        ("lambada_openai", "acc"),
    }
    assert by_key["mmlu", "acc"]["n_samples"] == 301 and by_key["mmlu", "acc"]["stderr"] == 0.01
    assert by_key["lambada_openai", "acc"] == {
        "run_id": "owt-large-gpt",
        "family": "gpt",
        "pair": "gpt-large",
        "task": "lambada_openai",
        "shots": 5,
        "metric": "acc",
        "value": 0.5,
        "stderr": 0.007,
        "n_samples": 100,
    }
    assert math.isnan(by_key["lambada_openai", "perplexity"]["stderr"])
    assert all(set(row) == set(DOWNSTREAM_COLUMNS) for row in rows)
