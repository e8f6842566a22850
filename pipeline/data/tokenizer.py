"""Tokenizers: a GPT-2-style byte-level BPE trained on the tiny corpora, and hub tokenizers saved locally."""

from collections.abc import Sequence
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from pipeline.data.files import atomic_directory, iter_texts

END_OF_TEXT = "<|endoftext|>"
MIN_VOCAB_SIZE = 257  # 256 byte symbols + <|endoftext|>
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


def train_bpe_tokenizer(
    corpus_files: Sequence[str | Path], vocab_size: int, out_dir: Path, *, overwrite: bool = False
) -> dict:
    """Train a deterministic GPT-2-style byte-level BPE (``<|endoftext|>`` = bos/eos/unk) on JSONL files into
    ``out_dir`` (atomic; loads with ``AutoTokenizer`` and Levanter's ``load_tokenizer``). Returns
    {"vocab_size", "documents"}."""
    if not corpus_files:
        raise ValueError(f"No corpus files given for tokenizer {out_dir}; expected at least one JSONL file.")
    if vocab_size < MIN_VOCAB_SIZE:
        raise ValueError(
            f"Tokenizer {out_dir}: vocab_size={vocab_size}; expected at least {MIN_VOCAB_SIZE} "
            f"(256 bytes + {END_OF_TEXT})."
        )
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[END_OF_TEXT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    documents = 0

    def texts():
        nonlocal documents
        for text in iter_texts(corpus_files):
            documents += 1
            yield text

    tokenizer.train_from_iterator(texts(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=END_OF_TEXT,
        eos_token=END_OF_TEXT,
        unk_token=END_OF_TEXT,
        model_max_length=1024,
        model_input_names=["input_ids", "attention_mask"],  # as GPT-2: no token_type_ids in caches
    )
    with atomic_directory(out_dir, overwrite=overwrite) as tmp:
        fast.save_pretrained(str(tmp))
    return {"vocab_size": len(fast), "documents": documents}


def save_pretrained_tokenizer(
    name_or_path: str, out_dir: Path, *, revision: str | None = None, overwrite: bool = False
) -> dict:
    """Save a tokenizer (hub id at ``revision``, or a local directory) to ``out_dir``, so later stages never need the
    hub; offline, a missing one fails naming it and the prefetch. Returns {"vocab_size", "bos", "eos"}."""
    from pipeline.data.hub import missing_from_cache
    from pipeline.execution.job_env import hub_offline

    local = Path(name_or_path).expanduser()
    if local.is_dir():
        source = str(local)
    elif str(name_or_path).startswith(("/", ".", "~")):
        raise FileNotFoundError(
            f"Tokenizer directory {name_or_path} does not exist; expected a Hugging Face tokenizer directory "
            "or a hub id such as 'gpt2'."
        )
    else:
        source = name_or_path
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, revision=revision)
    except OSError as error:
        if source == name_or_path and hub_offline():
            raise FileNotFoundError(missing_from_cache(f"Tokenizer {name_or_path}@{revision or 'main'}")) from error
        raise
    with atomic_directory(out_dir, overwrite=overwrite) as tmp:
        tokenizer.save_pretrained(str(tmp))
    return {"vocab_size": len(tokenizer), "bos": tokenizer.bos_token, "eos": tokenizer.eos_token}


def check_tokenizer_dir(tokenizer_dir: str | Path) -> Path:
    """Return `tokenizer_dir` as a Path if it holds a saved Hugging Face tokenizer, else FileNotFoundError."""
    path = Path(tokenizer_dir)
    if not path.is_dir() or not any((path / name).is_file() for name in _TOKENIZER_FILES):
        raise FileNotFoundError(
            f"Tokenizer directory {path} is missing or holds none of {list(_TOKENIZER_FILES)}; expected a "
            "directory written by train_bpe_tokenizer or save_pretrained_tokenizer."
        )
    return path
