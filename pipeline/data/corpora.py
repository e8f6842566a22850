"""The two tiny offline corpora shipped in `pipeline/data/corpora/` (see PROVENANCE.md there)."""

import itertools
import json
from pathlib import Path

from pipeline.data.build_corpora import CORPORA_DIR, SOURCES, corpus_filename
from pipeline.data.files import iter_texts
from pipeline.data.shards import SplitSource, export_shards

SPLITS = ("train", "validation", "test")
"""Every split a corpus can have; "test" only where the source has one (``corpus_splits``)."""


def tiny_corpus_splits(name: str) -> tuple[str, ...]:
    """The splits a tiny corpus ships: train, validation, and test where it stands in for a dataset with one."""
    if name not in SOURCES:
        raise ValueError(f"Unknown tiny corpus {name!r}; expected one of {sorted(SOURCES)}.")
    return SOURCES[name].splits


def tiny_corpus_file(name: str, split: str) -> Path:
    """Path of the shipped `.jsonl.gz` file of one split of a tiny corpus."""
    if split not in tiny_corpus_splits(name):
        raise ValueError(
            f"Unknown split {split!r} of tiny corpus {name!r}; expected one of {list(tiny_corpus_splits(name))}."
        )
    return CORPORA_DIR / corpus_filename(name, split)


def export_tiny_corpus(name: str, out_dir: Path, *, test_split: bool = False, **shard_options) -> dict:
    """Export a shipped tiny corpus as ``out_dir/{train,validation[,test]}-NNNNN.jsonl.gz`` shards (``test_split``:
    the corpus must ship one), atomically and resumably (``pipeline.data.shards.export_shards``, which takes
    ``shard_options``); returns its ``manifest.json``."""
    if test_split and "test" not in tiny_corpus_splits(name):
        raise ValueError(
            f"Tiny corpus {name!r} ships no test split; set test_split: false in its dataset source "
            f"or use one of {[n for n in SOURCES if 'test' in tiny_corpus_splits(n)]}."
        )
    files = {split: tiny_corpus_file(name, split) for split in (SPLITS if test_split else SPLITS[:2])}
    sources = {
        split: SplitSource(
            sum(1 for _ in iter_texts([file])),
            lambda start, file=file: itertools.islice(iter_texts([file]), start, None),
        )
        for split, file in files.items()
    }
    return export_shards(out_dir, sources, {"corpus": name}, what=f"Tiny corpus {name!r}", **shard_options)


def corpus_manifest(corpus_dir: Path) -> dict:
    """The ``manifest.json`` of an exported corpus folder (tiny or Hugging Face export)."""
    path = corpus_dir / "manifest.json"
    if not path.is_file():
        raise FileNotFoundError(f"Corpus {corpus_dir}: manifest.json is missing; expected an exported corpus folder.")
    return json.loads(path.read_text(encoding="utf-8"))


def corpus_splits(corpus_dir: str | Path) -> list[str]:
    """The splits an exported corpus folder holds (its manifest's keys among ``SPLITS``), in ``SPLITS`` order."""
    manifest = corpus_manifest(Path(corpus_dir))
    return [split for split in SPLITS if split in manifest]


def corpus_split_files(corpus_dir: str | Path, split: str) -> list[Path]:
    """The JSONL files of one split of an exported corpus folder, read from its `manifest.json` and resolved inside
    `corpus_dir`, so a moved results folder still works."""
    corpus_dir = Path(corpus_dir)
    manifest = corpus_manifest(corpus_dir)
    if split not in manifest or "files" not in manifest[split]:
        raise ValueError(
            f"Corpus manifest {corpus_dir / 'manifest.json'}: key '{split}.files' is missing; expected the file list."
        )
    files = [corpus_dir / Path(name).name for name in manifest[split]["files"]]
    missing = [path for path in files if not path.is_file()]
    if missing:
        raise FileNotFoundError(f"Corpus {corpus_dir}: file {missing[0]} listed in manifest.json does not exist.")
    return files
