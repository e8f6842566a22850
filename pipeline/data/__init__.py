"""Data stage: tiny offline corpora (`corpora`, built by `build_corpora`), paper-preset Hugging Face corpora
(`hf_corpora`), tokenizers (`tokenizer`) and Levanter token caches (`cache`); shared JSONL I/O in `files`."""
