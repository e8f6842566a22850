"""Evaluation fixtures: a small BPE tokenizer, tiny random models of every family, real-text requests."""

import functools
import itertools
from pathlib import Path

import equinox as eqx
import haliax as hax
import jax
import pytest
import torch
import transformers
from levanter.compat.hf_checkpoints import load_tokenizer
from lm_eval.api.instance import Instance
from models.models_testkit import init_prng, tiny_config

from pipeline.data.corpora import tiny_corpus_file
from pipeline.data.files import iter_texts, write_jsonl
from pipeline.data.tokenizer import train_bpe_tokenizer
from pipeline.models.hf_export import export_hf

SEQ_LEN = 32


@pytest.fixture(scope="session")
def tokenizer(tmp_path_factory):
    """A 512-token byte-level BPE trained on the first documents of both tiny corpora."""
    root = tmp_path_factory.mktemp("evaluate-tokenizer")
    for name, count in (("pydocs", 8), ("fortunes", 150)):
        write_jsonl(root / f"{name}.jsonl", itertools.islice(iter_texts([tiny_corpus_file(name, "train")]), count))
    train_bpe_tokenizer([root / "pydocs.jsonl", root / "fortunes.jsonl"], 512, root / "bpe")
    return load_tokenizer(str(root / "bpe"))


@functools.cache
def _random_model(family: str, vocab_size: int):
    """A tiny random model (``tiny_config``, ``initializer_range`` 0.2) of the tokenizer's vocabulary."""
    config = tiny_config(family, seq_len=SEQ_LEN, num_layers=2)
    with init_prng():
        return eqx.filter_jit(config.build)(hax.Axis("vocab", vocab_size), key=jax.random.PRNGKey(0))


@pytest.fixture(scope="session")
def random_model(tokenizer):
    return lambda family: _random_model(family, len(tokenizer))


def hf_model(model, tokenizer, out_dir: Path):
    """The ``transformers`` twin of a Levanter GPT-2 or Llama model: exported by ``export_hf``, loaded back by
    ``AutoModelForCausalLM`` (float32, eval mode)."""
    export_hf(model, tokenizer, out_dir)
    return transformers.AutoModelForCausalLM.from_pretrained(out_dir, torch_dtype=torch.float32).eval()


@pytest.fixture(scope="session")
def requests() -> list[Instance]:
    """(context, continuation) requests from real text of 4 to 73 words (short ones, and ones longer than the
    model's context, left-truncated), continuations of one to four words, and an empty context."""
    texts = itertools.islice(iter_texts([tiny_corpus_file("fortunes", "validation")]), 400)
    passages = [text.split() for text in texts if len(text.split()) >= 73][:24]
    pairs = []
    for i, words in enumerate(passages):
        words = words[: 4 + 3 * i]
        cut = len(words) - 1 - i % 4
        pairs.append((" ".join(words[:cut]), " " + " ".join(words[cut:])))
    pairs.append(("", "A fool and his money are soon parted."))
    return [Instance(request_type="loglikelihood", doc={}, arguments=pair, idx=i) for i, pair in enumerate(pairs)]


def torch_loglikelihoods(torch_model, lm, requests: list[Instance]) -> list[tuple[float, bool]]:
    """lm-eval's HF-model scoring, one request at a time (no batch, no padding): the window
    (context ⊕ continuation)[-(T+1):], log-probabilities of the last len(continuation) targets."""
    results = []
    for context, continuation in (request.args for request in requests):
        if context:
            context_ids, continuation_ids = lm._encode_pair(context, continuation)
        else:
            context_ids, continuation_ids = [lm.prefix_token_id], lm.tok_encode(continuation)
        window = (context_ids + continuation_ids)[-(lm.max_length + 1) :]
        with torch.no_grad():
            logits = torch_model(torch.tensor([window[:-1]])).logits[0].double()
        logprobs = torch.log_softmax(logits, dim=-1)[-len(continuation_ids) :]
        targets = torch.tensor(window[-len(continuation_ids) :])
        score = logprobs.gather(-1, targets[:, None]).sum().item()
        results.append((score, bool((logprobs.argmax(-1) == targets).all())))
    return results


@pytest.fixture(scope="session")
def task_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "pipeline" / "evaluate" / "tasks"
