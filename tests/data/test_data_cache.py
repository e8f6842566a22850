"""Token caches: Levanter-compatible layout and metadata, atomicity, errors (the Ray builder against the serial one:
tests/data/test_data_job_resume.py, through a stopped and resumed build)."""

import numpy as np
import pytest
from levanter.compat.hf_checkpoints import load_tokenizer
from levanter.data import text as levanter_text
from levanter.data.text import TextLmDatasetFormat, UrlSingleDatasetLMConfig, load_lm_dataset_cache
from levanter.store.cache import CacheLedger, CacheMetadata

from pipeline.data.cache import build_token_cache, cache_stats, lm_processor
from pipeline.data.files import iter_texts, write_jsonl


def _all_tokens(cache) -> np.ndarray:
    data = cache.store.tree["input_ids"]
    return data.data[0 : data.data_size].read().result()


def _expected_ids(tokenizer_dir, files) -> list[list[int]]:
    """What Levanter's BatchTokenizer produces for GPT-2-style tokenizers: bos + " " + text + " " + eos."""
    tokenizer = load_tokenizer(str(tokenizer_dir))
    bos, eos = tokenizer.bos_token, tokenizer.eos_token
    return [tokenizer(f"{bos} {text} {eos}")["input_ids"] for text in iter_texts(files)]


@pytest.fixture(scope="module")
def serial_cache(tmp_path_factory, small_corpus, tokenizer_dir):
    root = tmp_path_factory.mktemp("caches")
    stats = build_token_cache(small_corpus, tokenizer_dir, root / "train")
    return root, stats


def test_serial_cache_contents(serial_cache, small_corpus, tokenizer_dir):
    root, stats = serial_cache
    expected = _expected_ids(tokenizer_dir, small_corpus)
    assert stats["documents"] == len(expected) == 162
    assert stats["tokens"] == sum(map(len, expected)) == cache_stats(root / "train")["tokens"]
    assert cache_stats(root / "train") == {"documents": stats["documents"], "tokens": stats["tokens"]}
    cache = load_lm_dataset_cache(str(root / "train"), TextLmDatasetFormat(), load_tokenizer(str(tokenizer_dir)))
    assert [list(cache[i]["input_ids"]) for i in (0, 1, 161)] == [expected[i] for i in (0, 1, 161)]
    assert np.array_equal(_all_tokens(cache), np.concatenate(expected))
    assert sorted(p.name for p in root.iterdir()) == ["train"]


def test_levanter_config_loads_without_rebuilding(serial_cache, small_corpus, tokenizer_dir, monkeypatch):
    root, stats = serial_cache

    def no_rebuild(*args, **kwargs):
        raise AssertionError("Levanter tried to rebuild the cache")

    monkeypatch.setattr(levanter_text, "build_lm_dataset_cache", no_rebuild)
    config = UrlSingleDatasetLMConfig(
        cache_dir=str(root), tokenizer=str(tokenizer_dir), train_urls=[str(p) for p in small_corpus]
    )
    cache = config.build_or_load_cache("train", monitors=False)
    assert cache.is_finished and len(cache) == stats["documents"]
    expected = CacheMetadata(preprocessor_metadata=lm_processor(tokenizer_dir).metadata)
    assert CacheLedger.load(str(root / "train")).metadata == expected
    assert not CacheLedger.load(str(root / "train")).metadata.compare_to(expected)
    assert expected.preprocessor_metadata["tokenizer"] == str(tokenizer_dir)
    assert expected.preprocessor_metadata["append_bos"] and expected.preprocessor_metadata["append_eos"]


def test_existing_output_and_overwrite(serial_cache, small_corpus, tokenizer_dir):
    root, stats = serial_cache
    with pytest.raises(FileExistsError, match="already exists"):
        build_token_cache(small_corpus, tokenizer_dir, root / "train")
    again = build_token_cache(small_corpus[:1], tokenizer_dir, root / "train", overwrite=True)
    assert again["documents"] == 12 and cache_stats(root / "train")["documents"] == 12
    build_token_cache(small_corpus, tokenizer_dir, root / "train", overwrite=True)
    assert cache_stats(root / "train")["tokens"] == stats["tokens"]


def test_failed_build_leaves_nothing_that_looks_complete(tmp_path, small_corpus, tokenizer_dir):
    bad = tmp_path / "bad.jsonl"
    write_jsonl(bad, ["fine"] * 3000)
    with open(bad, "a") as f:
        f.write('{"text": "truncated\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl, line 3001: not valid JSON"):
        build_token_cache([*small_corpus, bad], tokenizer_dir, tmp_path / "cache" / "train")
    assert not (tmp_path / "cache" / "train").exists()
    assert [path.name for path in (tmp_path / "cache").iterdir()] == [".train.partial"]  # its staging folder


def test_bad_inputs(tmp_path, small_corpus, tokenizer_dir):
    with pytest.raises(FileNotFoundError, match=r"missing\.jsonl does not exist; expected a JSONL file"):
        build_token_cache([tmp_path / "missing.jsonl"], tokenizer_dir, tmp_path / "c")
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ValueError, match=r"empty\.jsonl contains no documents"):
        build_token_cache([tmp_path / "empty.jsonl"], tokenizer_dir, tmp_path / "c", builder="ray")
    with pytest.raises(FileNotFoundError, match="Tokenizer directory .*no_tokenizer is missing"):
        build_token_cache(small_corpus, tmp_path / "no_tokenizer", tmp_path / "c")
    with pytest.raises(ValueError, match="builder='spark'; expected 'serial' or 'ray'"):
        build_token_cache(small_corpus, tokenizer_dir, tmp_path / "c", builder="spark")
    with pytest.raises(ValueError, match="No JSONL files given"):
        build_token_cache([], tokenizer_dir, tmp_path / "c")
    with pytest.raises(FileNotFoundError, match="has no shard_ledger.json; expected a finished Levanter cache"):
        cache_stats(tmp_path)
    assert not (tmp_path / "c").exists()
