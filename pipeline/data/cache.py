"""Levanter token caches (TreeCache) built from JSONL files, loadable by `UrlSingleDatasetLMConfig` as is."""

import itertools
import json
import logging
import os
import shutil
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
from pipeline.data.shards import LEVANTER_LEDGER, finished_shard_count, stopped, whole_ledger
from pipeline.data.tokenizer import check_tokenizer_dir
from pipeline.execution.progress import Progress
from pipeline.execution.stop_signals import StopSignals

Builder = Literal["serial", "ray"]
BATCH_SIZE = 1024
INPUTS_FILE = "inputs.json"
WAIT_S = 1.0
"""Seconds between looks at the Ray builder's ledger (progress, a stop signal)."""
logger = logging.getLogger(__name__)


def lm_processor(tokenizer_dir: str | Path) -> BatchTokenizer:
    """Levanter's text preprocessor (BatchTokenizer, bos and eos enforced) for a local tokenizer; its
    ``name_or_path`` (``str(tokenizer_dir)``) is in the cache metadata, so training must name it the same."""
    tokenizer = load_tokenizer(str(check_tokenizer_dir(tokenizer_dir)))
    return preprocessor_for_format(
        TextLmDatasetFormat(text_key=TEXT_FIELD), tokenizer, enforce_bos=True, enforce_eos=True
    )


def build_token_cache(
    jsonl_files: Sequence[str | Path],
    tokenizer_dir: str | Path,
    out_dir: Path,
    *,
    builder: Builder = "serial",
    overwrite: bool = False,
) -> dict:
    """Tokenize JSONL files (in order) into a Levanter TreeCache at ``out_dir``, with Levanter's SerialCacheWriter
    (``serial``) or its ``build_lm_dataset_cache`` on Ray (``ray``): the same token ids and CacheMetadata either way.
    Built resumably in the staging folder, ``INPUTS_FILE`` recording its inputs (docs/runs.md#data-jobs-resume); a
    stop signal raises ``RunStopped``. Returns {"documents", "tokens", "seconds"}."""
    if builder not in ("serial", "ray"):
        raise ValueError(f"Token cache {out_dir}: builder={builder!r}; expected 'serial' or 'ray'.")
    if not jsonl_files:
        raise ValueError(f"No JSONL files given for token cache {out_dir}; expected at least one.")
    processor = lm_processor(tokenizer_dir)
    inputs = cache_inputs(jsonl_files, processor, builder)
    out_dir = Path(out_dir)
    if overwrite and _recorded_inputs(out_dir) == inputs:
        logger.info("Token cache %s is already built from these inputs; kept", out_dir)
        return {**cache_stats(out_dir), "seconds": 0.0}
    start = time.perf_counter()
    with StopSignals() as stop, atomic_directory(out_dir, overwrite=overwrite, resumable=True) as tmp:
        if builder == "serial" or _recorded_inputs(tmp) != inputs or whole_ledger(tmp, restore=True) is None:
            shutil.rmtree(tmp)
            tmp.mkdir()
        (tmp / INPUTS_FILE).write_text(inputs)
        build = _build_serial if builder == "serial" else _build_ray
        documents = build(jsonl_files, processor, tmp, stop)
        stats = cache_stats(tmp)
        if stats["documents"] != documents:
            raise RuntimeError(f"Token cache {out_dir} holds {stats['documents']} documents; expected {documents}.")
    return {**stats, "seconds": round(time.perf_counter() - start, 3)}


def cache_inputs(jsonl_files: Sequence[str | Path], processor: BatchTokenizer, builder: Builder) -> str:
    """What a token cache is built from, as JSON: each file's path, size and modification time (None where it is
    missing), the tokenizer's metadata and the builder."""
    files = [Path(path).resolve() for path in jsonl_files]
    stats = [(path.stat().st_size, path.stat().st_mtime_ns) if path.is_file() else None for path in files]
    described = {"files": [[str(path), stat] for path, stat in zip(files, stats, strict=True)], "builder": builder}
    return json.dumps({**described, "processor": processor.metadata}, sort_keys=True, default=str)


def _recorded_inputs(cache_dir: Path) -> str | None:
    path = cache_dir / INPUTS_FILE
    return path.read_text() if path.is_file() else None


def _build_serial(
    jsonl_files: Sequence[str | Path], processor: BatchTokenizer, cache_dir: Path, stop: StopSignals
) -> int:
    """Tokenize in this process with Levanter's SerialCacheWriter; returns the number of documents."""
    metadata = CacheMetadata(preprocessor_metadata=processor.metadata)
    progress = Progress(f"Token cache {cache_dir}", len(jsonl_files), "shards")
    documents = 0
    with SerialCacheWriter(str(cache_dir), processor.output_exemplar, metadata=metadata) as writer:
        for path in jsonl_files:
            docs = iter_jsonl(path)
            while batch := list(itertools.islice(docs, BATCH_SIZE)):
                if stop.signal_name is not None:
                    raise stopped(progress.what, stop, progress.done, progress.total, "the serial builder keeps none")
                writer.write_batch(processor(batch))
                documents += len(batch)
            progress.advance()
    return documents


def _build_ray(jsonl_files: Sequence[str | Path], processor: BatchTokenizer, cache_dir: Path, stop: StopSignals) -> int:
    """Validate the files of the shards Levanter's ledger in `cache_dir` has not finished here (clear errors), then run
    Levanter's Ray cache builder, which resumes from that ledger, and wait for it."""
    source = UrlDataSource([str(Path(path).resolve()) for path in jsonl_files])
    ledger = CacheLedger.load(str(cache_dir)) if (cache_dir / LEVANTER_LEDGER).is_file() else None
    finished = set(ledger.finished_shards) if ledger is not None else set()
    shards = zip(source.shard_names, jsonl_files, strict=True) if finished else []  # names: Levanter's, for files
    unfinished = [path for name, path in shards if name not in finished] if finished else jsonl_files
    documents = sum(ledger.shard_rows[name] for name in finished) + sum(
        1 for path in unfinished for _ in iter_jsonl(path)
    )
    progress = Progress(f"Token cache {cache_dir}", len(jsonl_files), "shards", done=len(finished))
    cache = build_lm_dataset_cache(
        str(cache_dir),
        source,
        TextLmDatasetFormat(text_key=TEXT_FIELD),
        processor.tokenizer,
        options=_ray_cache_options(),
        enforce_eos=True,
        monitors=False,
    )
    while True:
        try:
            cache.await_finished(timeout=WAIT_S, await_cleanup=True)
            return documents
        except TimeoutError:
            done = max(finished_shard_count(cache_dir), progress.done)  # a backup ledger may be behind
            progress.advance(done - progress.done)
            if stop.signal_name is not None:  # its Ray ends with the verb, after the attempt's record
                raise stopped(
                    progress.what, stop, done, progress.total, "Levanter's ledger keeps the finished ones"
                ) from None


def _ray_cache_options() -> CacheOptions:
    """Levanter's default options, or one shard group where the cluster cannot run its group-copy task (it asks 4
    CPUs and 6 GiB and would never start): same tokens."""
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
    if not (path / LEVANTER_LEDGER).is_file():
        raise FileNotFoundError(
            f"Token cache {path} has no {LEVANTER_LEDGER}; expected a finished Levanter cache directory."
        )
    cache = TreeCache.load(str(path), {"input_ids": np.zeros((0,), dtype=np.int32)})
    return {"documents": len(cache), "tokens": int(cache.store.tree["input_ids"].data_size)}
