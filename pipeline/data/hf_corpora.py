"""Paper-preset corpora (WikiText-103, OpenWebText) exported from Hugging Face datasets to JSONL shards."""

import re
from collections.abc import Iterator
from pathlib import Path

import datasets

from pipeline.data.files import TEXT_FIELD, iter_jsonl
from pipeline.data.shards import SplitSource, export_shards

_LOCAL_JSONL = ("*.jsonl", "*.jsonl.gz")
_LOCAL_PARQUET = "*.parquet"


def _local_data_files(dataset: str, path: Path) -> dict[str, list[str]]:
    """Validated local JSONL files by split: a single file is "train"; in a folder, the split is the file-name
    prefix before the first "-", "." or "_" (train.jsonl, validation-00000.jsonl.gz, ...)."""
    files = [path] if path.is_file() else sorted(f for pattern in _LOCAL_JSONL for f in path.rglob(pattern))
    if not files:
        raise ValueError(
            f"Dataset {dataset!r}: local source {path} holds no .jsonl or .jsonl.gz files; expected "
            "JSONL files named by split (train*.jsonl, validation*.jsonl) or a save_to_disk folder."
        )
    data_files: dict[str, list[str]] = {}
    for file in files:
        for _ in iter_jsonl(file):
            pass
        split = "train" if path.is_file() else re.split(r"[-._]", file.name, maxsplit=1)[0]
        data_files.setdefault(split, []).append(str(file))
    return data_files


def _load(dataset: str, source: str | Path, revision: str | None, cache_dir: str | None) -> datasets.DatasetDict:
    """Load ``source``: a ``save_to_disk`` folder, local parquet (``<config>/<split>/NNNN.parquet``) or JSONL, or a
    hub id at ``revision`` (offline: the prefetched snapshot; a missing one fails with one sentence)."""
    from pipeline.data.hub import dataset_snapshot
    from pipeline.execution.job_env import hub_offline

    path = Path(source).expanduser()
    if (path / "dataset_dict.json").is_file() or (path / "state.json").is_file():  # a save_to_disk folder
        loaded = datasets.load_from_disk(str(path))
    elif path.is_dir() and any(path.rglob(_LOCAL_PARQUET)):
        loaded = datasets.load_dataset(str(path), cache_dir=cache_dir)
    elif path.exists():
        data_files = _local_data_files(dataset, path)
        loaded = datasets.load_dataset("json", data_files=data_files, cache_dir=cache_dir)
    elif str(source).startswith(("/", ".", "~")):
        raise FileNotFoundError(
            f"Dataset {dataset!r}: local source {source} does not exist; expected a JSONL file, a folder of "
            "JSONL files or a save_to_disk folder."
        )
    elif hub_offline():
        snapshot = dataset_snapshot(dataset, str(source), revision)
        loaded = datasets.load_dataset(str(snapshot), cache_dir=cache_dir)
    else:
        loaded = datasets.load_dataset(str(source), revision=revision, cache_dir=cache_dir)
    if isinstance(loaded, datasets.Dataset):
        loaded = datasets.DatasetDict({"train": loaded})
    return loaded


def _splits(
    dataset: str, loaded: datasets.DatasetDict, validation_fraction: float | None, seed: int, test_split: bool
) -> dict[str, datasets.Dataset]:
    """The train/validation splits: the source's own, or a seeded shuffled split of its train split; with
    ``test_split`` also the source's own test split (fine-tunes are scored on it:
    docs/paper.md#fine-tune-test-split)."""
    if test_split and validation_fraction is not None:
        raise ValueError(
            f"Dataset {dataset!r}: test_split=true with validation_fraction={validation_fraction}; a test split "
            "must be the source's own (drop one of the two keys)."
        )
    wanted = ("train",) if validation_fraction is not None else ("train", "validation")
    wanted += ("test",) if test_split else ()
    missing = [split for split in wanted if split not in loaded]
    if missing:
        raise ValueError(
            f"Dataset {dataset!r} has splits {sorted(loaded)}; expected {list(wanted)} "
            f"(validation_fraction={validation_fraction}, test_split={test_split})."
        )
    if validation_fraction is None:
        return {split: loaded[split] for split in wanted}
    if not 0 < validation_fraction < 1:
        raise ValueError(f"Dataset {dataset!r}: validation_fraction={validation_fraction}; expected 0 < f < 1.")
    if len(loaded["train"]) < 2:
        raise ValueError(
            f"Dataset {dataset!r} split 'train' has {len(loaded['train'])} documents; expected at least 2 "
            "to carve out a validation split."
        )
    split = loaded["train"].train_test_split(test_size=validation_fraction, seed=seed, shuffle=True)
    return {"train": split["train"], "validation": split["test"]}


def _texts(dataset: str, split: str, ds: datasets.Dataset, start: int) -> Iterator[str]:
    """Yield the texts of one split from row ``start`` on, in order, blank ones included."""
    rows = ds.select_columns([TEXT_FIELD])
    rows = rows.select(range(start, len(rows))) if start else rows
    for row, text in enumerate((t for batch in rows.iter(1000) for t in batch[TEXT_FIELD]), start):
        if not isinstance(text, str):
            raise ValueError(
                f"Dataset {dataset!r} split {split!r}, row {row}: field {TEXT_FIELD!r} is "
                f"{type(text).__name__}; expected a string."
            )
        yield text


def export_hf_corpus(
    dataset: str,
    out_dir: Path,
    *,
    source: str | Path,
    validation_fraction: float | None,
    seed: int,
    test_split: bool = False,
    revision: str | None = None,
    cache_dir: str | Path | None = None,
    **shard_options,
) -> dict:
    """Export a corpus (hub id or local data, ``_load``; splits ``_splits``) to ``out_dir/{split}-NNNNN.jsonl.gz``
    shards for Levanter's UrlDataSource, blank documents dropped, atomically and resumably (``shard_options``:
    ``pipeline.data.shards.export_shards``'s). Returns the manifest with the source's header."""
    cache = None if cache_dir is None else str(cache_dir)
    loaded = _load(dataset, source, revision, cache)
    splits = _splits(dataset, loaded, validation_fraction, seed, test_split)
    for split, ds in splits.items():
        if TEXT_FIELD not in ds.column_names:
            raise ValueError(
                f"Dataset {dataset!r} split {split!r} has columns {ds.column_names}; expected a string "
                f"column {TEXT_FIELD!r}."
            )
    header = {
        "corpus": dataset,
        "source": str(source),
        "revision": revision,
        "text_field": TEXT_FIELD,
        "validation_fraction": validation_fraction,
        "seed": seed,
    }
    sources = {
        split: SplitSource(len(ds), lambda start, split=split, ds=ds: _texts(dataset, split, ds, start))
        for split, ds in splits.items()
    }
    return export_shards(out_dir, sources, header, what=f"Dataset {dataset!r}", **shard_options)
