"""Levanter token caches (TreeCache) built from JSONL files, loadable by `UrlSingleDatasetLMConfig` as is."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import ray
from levanter.compat.hf_checkpoints import load_tokenizer
from levanter.data.sharded_datasource import UrlDataSource
from levanter.data.text import BatchTokenizer, TextLmDatasetFormat, build_lm_dataset_cache, preprocessor_for_format
from levanter.store.cache import CacheLedger, CacheMetadata, CacheOptions, SerialCacheWriter, TreeCache

from pipeline.data.files import TEXT_FIELD, atomic_directory, iter_jsonl
from pipeline.data.tokenizer import check_tokenizer_dir

Builder = Literal["serial", "ray"]
BATCH_SIZE = 1024
LEDGER_FILE = "shard_ledger.json"


def lm_processor(tokenizer_dir: str | Path, text_field: str = TEXT_FIELD) -> BatchTokenizer:
    """Levanter's text-format preprocessor (BatchTokenizer, bos and eos enforced) for a local tokenizer.

    The tokenizer's `name_or_path` (the `str(tokenizer_dir)` given here) is part of the cache metadata, so the
    training config should name the tokenizer with the same string.
    """
    tokenizer = load_tokenizer(str(check_tokenizer_dir(tokenizer_dir)))
    return preprocessor_for_format(
        TextLmDatasetFormat(text_key=text_field), tokenizer, enforce_bos=True, enforce_eos=True
    )


def build_token_cache(
    jsonl_files: Sequence[str | Path],
    tokenizer_dir: str | Path,
    out_dir: Path,
    *,
    builder: Builder = "serial",
    text_field: str = TEXT_FIELD,
    overwrite: bool = False,
) -> dict:
    """Tokenize JSONL files (in order) into a Levanter TreeCache at `out_dir`, e.g. `<cache_dir>/train`.

    builder="serial" writes with Levanter's SerialCacheWriter in this process; builder="ray" runs Levanter's
    own `build_lm_dataset_cache` on Ray (`ray.init()` on demand) and waits for it. Both store the same token
    ids and the same CacheMetadata, so `UrlSingleDatasetLMConfig(cache_dir=<parent>, tokenizer=<same string>)`
    loads the cache without rebuilding. The cache is built beside `out_dir` and renamed into place at the end.
    Returns {"documents", "tokens", "seconds"}.
    """
    if builder not in ("serial", "ray"):
        raise ValueError(f"Token cache {out_dir}: builder={builder!r}; expected 'serial' or 'ray'.")
    if not jsonl_files:
        raise ValueError(f"No JSONL files given for token cache {out_dir}; expected at least one.")
    processor = lm_processor(tokenizer_dir, text_field)
    start = time.perf_counter()
    with atomic_directory(out_dir, overwrite=overwrite) as tmp:
        if builder == "serial":
            documents = _build_serial(jsonl_files, processor, tmp, text_field)
        else:
            documents = _build_ray(jsonl_files, processor, tmp, text_field)
        stats = cache_stats(tmp)
        if stats["documents"] != documents:
            raise RuntimeError(f"Token cache {out_dir} holds {stats['documents']} documents; expected {documents}.")
    return {**stats, "seconds": round(time.perf_counter() - start, 3)}


def _build_serial(
    jsonl_files: Sequence[str | Path], processor: BatchTokenizer, cache_dir: Path, text_field: str
) -> int:
    """Tokenize in this process with Levanter's SerialCacheWriter; returns the number of documents."""
    metadata = CacheMetadata(preprocessor_metadata=processor.metadata)
    docs = (obj for path in jsonl_files for obj in iter_jsonl(path, text_field))
    documents = 0
    with SerialCacheWriter(str(cache_dir), processor.output_exemplar, metadata=metadata) as writer:
        while batch := list(itertools.islice(docs, BATCH_SIZE)):
            writer.write_batch(processor(batch))
            documents += len(batch)
    return documents


def _build_ray(jsonl_files: Sequence[str | Path], processor: BatchTokenizer, cache_dir: Path, text_field: str) -> int:
    """Validate the files here (clear errors), then run Levanter's Ray cache builder and wait for it."""
    documents = sum(1 for path in jsonl_files for _ in iter_jsonl(path, text_field))
    source = UrlDataSource([str(Path(path).resolve()) for path in jsonl_files])
    cache = build_lm_dataset_cache(
        str(cache_dir),
        source,
        TextLmDatasetFormat(text_key=text_field),
        processor.tokenizer,
        options=_ray_cache_options(),
        enforce_eos=True,
        monitors=False,
    )
    cache.await_finished(timeout=None, await_cleanup=True)
    return documents


def _ray_cache_options() -> CacheOptions:
    """Levanter's default options, or one shard group where the cluster cannot run its group-copy task.

    Levanter tokenizes shard groups in parallel, then concatenates them with a task that asks for 4 CPUs and
    6 GiB; on a smaller cluster that task never starts, so all shards go into one group (same tokens).
    """
    if not ray.is_initialized():
        from pipeline.execution.runner import require_ray_cluster_answers

        address = os.environ.get("RAY_ADDRESS", "local")  # RAY_ADDRESS's cluster, else a new local one
        if address != "local":
            require_ray_cluster_answers(address)
        ray.init(address=address)
    resources = ray.cluster_resources()
    cpus = resources.get("CPU", 0)
    if cpus < 2:
        raise ValueError(
            f"Ray cluster has {cpus} CPUs; expected at least 2 for Levanter's cache builder "
            "(a 0.1-CPU coordinator plus 1-CPU writer and tokenizer tasks would otherwise wait forever)."
        )
    if cpus < 4 or resources.get("memory", 0) < 6 * 2**30:
        return CacheOptions.one_group()
    return CacheOptions.default()


def cache_stats(cache_dir: str | Path) -> dict:
    """{"documents", "tokens"} of a finished token cache."""
    path = Path(cache_dir)
    if not (path / LEDGER_FILE).is_file():
        raise FileNotFoundError(
            f"Token cache {path} has no {LEDGER_FILE}; expected a finished Levanter cache directory."
        )
    cache = TreeCache.load(str(path), {"input_ids": np.zeros((0,), dtype=np.int32)})
    return {"documents": len(cache), "tokens": int(cache.store.tree["input_ids"].data_size)}


def cache_token_count(cache_dir: str | Path) -> int:
    """Number of tokens stored in a finished token cache."""
    return cache_stats(cache_dir)["tokens"]


def cache_metadata(cache_dir: str | Path) -> CacheMetadata:
    """The CacheMetadata recorded in a cache's ledger (compare with `lm_processor(...).metadata`)."""
    return CacheLedger.load(str(cache_dir)).metadata
