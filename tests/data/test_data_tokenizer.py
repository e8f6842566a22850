"""Byte-level BPE training and local copies of pretrained tokenizers."""

import pytest
from levanter.compat.hf_checkpoints import load_tokenizer
from transformers import AutoTokenizer

from pipeline.data.tokenizer import END_OF_TEXT, check_tokenizer_dir, save_pretrained_tokenizer, train_bpe_tokenizer

SAMPLE = "The quick brown fox — naïve café — doesn't   jump.\n\tTabs, too! <|endoftext|>"


def test_trained_tokenizer_loads_like_gpt2(tokenizer_dir):
    for tokenizer in (load_tokenizer(str(tokenizer_dir)), AutoTokenizer.from_pretrained(tokenizer_dir)):
        assert len(tokenizer) == 512
        assert tokenizer.bos_token == tokenizer.eos_token == tokenizer.unk_token == END_OF_TEXT
        assert tokenizer.model_max_length == 1024
        encoded = tokenizer(SAMPLE)
        assert set(encoded) == {"input_ids", "attention_mask"}
        assert encoded["input_ids"][-1] == tokenizer.eos_token_id  # the special token is matched, not split
        assert encoded["input_ids"][0] != tokenizer.bos_token_id  # no automatic bos, like GPT-2
        assert tokenizer.decode(encoded["input_ids"]) == SAMPLE  # byte-level: lossless


def test_training_is_deterministic(tmp_path, small_corpus, tokenizer_dir):
    stats = train_bpe_tokenizer(small_corpus, 512, tmp_path / "again")
    assert stats == {"vocab_size": 512, "documents": 162}
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        assert (tmp_path / "again" / name).read_bytes() == (tokenizer_dir / name).read_bytes()


def test_training_errors(tmp_path, small_corpus):
    with pytest.raises(ValueError, match="No corpus files given"):
        train_bpe_tokenizer([], 512, tmp_path / "t")
    with pytest.raises(ValueError, match="vocab_size=100; expected at least 257"):
        train_bpe_tokenizer(small_corpus, 100, tmp_path / "t")
    with pytest.raises(FileNotFoundError, match=r"missing\.jsonl does not exist"):
        train_bpe_tokenizer([tmp_path / "missing.jsonl"], 512, tmp_path / "t")
    (tmp_path / "bad.jsonl").write_text('{"text": "fine"}\n{"txt": "oops"}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl, line 2: has no string field 'text'"):
        train_bpe_tokenizer([tmp_path / "bad.jsonl"], 512, tmp_path / "t")
    assert not (tmp_path / "t").exists()


def test_save_pretrained_tokenizer_from_local_dir(tmp_path, tokenizer_dir):
    stats = save_pretrained_tokenizer(str(tokenizer_dir), tmp_path / "copy")
    assert stats == {"vocab_size": 512, "bos": END_OF_TEXT, "eos": END_OF_TEXT}
    original, copy = load_tokenizer(str(tokenizer_dir)), load_tokenizer(str(tmp_path / "copy"))
    assert copy(SAMPLE)["input_ids"] == original(SAMPLE)["input_ids"]
    assert check_tokenizer_dir(tmp_path / "copy") == tmp_path / "copy"


def test_missing_tokenizer_dirs(tmp_path):
    with pytest.raises(FileNotFoundError, match="Tokenizer directory .*nowhere does not exist"):
        save_pretrained_tokenizer(str(tmp_path / "nowhere"), tmp_path / "copy")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="Tokenizer directory .*empty is missing or holds none of"):
        check_tokenizer_dir(tmp_path / "empty")
