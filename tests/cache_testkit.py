"""What the token-cache resume tests share (``from cache_testkit import token_arrays``: tests/ is on the tests' import
path, as for cli_testkit.py): a cache split's arrays, and the finished shards of a stopped build made unreadable."""

import os
from pathlib import Path

import numpy as np
from levanter.data.sharded_datasource import UrlDataSource
from levanter.store.tree_store import TreeStore

from pipeline.data.corpora import corpus_split_files


def token_arrays(cache: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """The token ids and the document offsets of one split of a token cache."""
    store = TreeStore.open({"input_ids": np.zeros((0,), dtype=np.int32)}, str(cache / split), mode="r")
    ids = store.tree["input_ids"]
    return ids.data[0 : ids.data_size].read().result(), ids.offsets[0 : len(store) + 1].read().result()


def spoil_finished_shards(corpus: Path, finished: list[str]) -> None:
    """Overwrite the train files of the ``finished`` shards (Levanter's shard names) of ``corpus`` with zeros of the
    same size and times: a resumed build that tokenized one again would fail on it."""
    files = corpus_split_files(corpus, "train")
    shard_files = dict(zip(UrlDataSource([str(path) for path in files]).shard_names, files, strict=True))
    for name in finished:
        path = shard_files[name]
        times = (path.stat().st_atime_ns, path.stat().st_mtime_ns)
        path.write_bytes(bytes(path.stat().st_size))
        os.utime(path, ns=times)
