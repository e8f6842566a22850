"""The two tiny offline corpora shipped in `pipeline/data/corpora/` (see PROVENANCE.md there)."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.data.build_corpora import CORPORA_DIR, corpus_filename
from pipeline.data.files import atomic_directory, iter_texts, write_jsonl

SPLITS = ("train", "validation")

TINY_CORPORA: dict[str, str] = {
    "pydocs": "Python 3.11 documentation prose (library reference, tutorial, language reference, HOWTOs, "
    "FAQ): encyclopedic/technical, the stand-in for WikiText-103.",
    "fortunes": "Debian fortune cookies (quotes, jokes, anecdotes, poems, literature): informal/narrative, "
    "the stand-in for OpenWebText.",
}


def tiny_corpus_file(name: str, split: str) -> Path:
    """Path of the shipped `.jsonl.gz` file of one split of a tiny corpus."""
    if name not in TINY_CORPORA:
        raise ValueError(f"Unknown tiny corpus {name!r}; expected one of {sorted(TINY_CORPORA)}.")
    if split not in SPLITS:
        raise ValueError(f"Unknown split {split!r} of tiny corpus {name!r}; expected one of {list(SPLITS)}.")
    return CORPORA_DIR / corpus_filename(name, split)


def export_tiny_corpus(name: str, out_dir: Path, *, overwrite: bool = False) -> dict:
    """Write `out_dir/train.jsonl` and `out_dir/validation.jsonl` (uncompressed) from a shipped tiny corpus.

    The directory appears atomically, with a `manifest.json` holding the returned stats:
    {"corpus", "train": {"documents", "characters", "files"}, "validation": {...}}.
    """
    sources = {split: tiny_corpus_file(name, split) for split in SPLITS}
    out_dir = Path(out_dir)
    stats: dict = {"corpus": name}
    with atomic_directory(out_dir, overwrite=overwrite) as tmp:
        for split, source in sources.items():
            stats[split] = write_jsonl(tmp / f"{split}.jsonl", iter_texts([source]))
            stats[split]["files"] = [str((out_dir / f"{split}.jsonl").resolve())]
        (tmp / "manifest.json").write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
    return stats


def corpus_split_files(corpus_dir: str | Path, split: str) -> list[Path]:
    """The JSONL files of one split of an exported corpus folder (tiny or Hugging Face export), read from its
    `manifest.json` and resolved inside `corpus_dir`, so a moved results folder still works."""
    corpus_dir = Path(corpus_dir)
    manifest_path = corpus_dir / "manifest.json"
    if not manifest_path.is_file():
        raise FileNotFoundError(f"Corpus {corpus_dir}: manifest.json is missing; expected an exported corpus folder.")
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    if split not in manifest or "files" not in manifest[split]:
        raise ValueError(f"Corpus manifest {manifest_path}: key '{split}.files' is missing; expected the file list.")
    files = [corpus_dir / Path(name).name for name in manifest[split]["files"]]
    missing = [path for path in files if not path.is_file()]
    if missing:
        raise FileNotFoundError(f"Corpus {corpus_dir}: file {missing[0]} listed in manifest.json does not exist.")
    return files
