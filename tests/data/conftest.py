"""Data-stage fixtures (HF_HUB_OFFLINE is set by tests/conftest.py): small JSONL corpora and a BPE."""

import itertools
from pathlib import Path

import pytest

from pipeline.data.corpora import tiny_corpus_file
from pipeline.data.files import iter_texts, write_jsonl
from pipeline.data.tokenizer import train_bpe_tokenizer

SMALL_DOCS = {"pydocs": 12, "fortunes": 150}


@pytest.fixture(scope="session")
def small_corpus(tmp_path_factory) -> list[Path]:
    """Two plain JSONL files: the first documents of each tiny corpus's train split."""
    root = tmp_path_factory.mktemp("small_corpus")
    files = []
    for name, count in SMALL_DOCS.items():
        path = root / f"{name}.jsonl"
        write_jsonl(path, itertools.islice(iter_texts([tiny_corpus_file(name, "train")]), count))
        files.append(path)
    return files


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory, small_corpus) -> Path:
    """A 512-token byte-level BPE trained on `small_corpus`."""
    out = tmp_path_factory.mktemp("tokenizer") / "bpe512"
    train_bpe_tokenizer(small_corpus, 512, out)
    return out
