"""JSONL corpus files: validated reading, deterministic writing and atomic output directories."""

import gzip
import hashlib
import json
import shutil
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pipeline.artifacts import atomic_file

TEXT_FIELD = "text"


def iter_jsonl(path: str | Path) -> Iterator[dict]:
    """Yield the JSON objects of a ``.jsonl`` or ``.jsonl.gz`` file, each with a string ``TEXT_FIELD``. Raises
    FileNotFoundError, or ValueError (with the line number) for a corrupt line, a missing field or no documents."""
    path = Path(path)
    expected = f'one JSON object per line like {{"{TEXT_FIELD}": "..."}}'
    if not path.is_file():
        raise FileNotFoundError(f"Corpus file {path} does not exist; expected a JSONL file with {expected}.")
    opener = gzip.open if path.name.endswith(".gz") else open
    lineno = 0
    try:
        with opener(path, "rb") as f:
            for lineno, raw in enumerate(f, start=1):
                try:
                    obj = json.loads(raw.decode("utf-8"))
                except UnicodeDecodeError as e:
                    raise ValueError(
                        f"Corpus file {path}, line {lineno}: not UTF-8 ({e}); expected UTF-8 JSONL, "
                        "optionally gzip-compressed."
                    ) from None
                except json.JSONDecodeError as e:
                    raise ValueError(
                        f"Corpus file {path}, line {lineno}: not valid JSON ({e.msg}); expected {expected}."
                    ) from None
                if not isinstance(obj, dict) or not isinstance(obj.get(TEXT_FIELD), str):
                    raise ValueError(
                        f"Corpus file {path}, line {lineno}: has no string field {TEXT_FIELD!r}; expected {expected}."
                    )
                yield obj
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise ValueError(
            f"Corpus file {path}, after line {lineno}: cannot be decoded ({e}); expected UTF-8 JSONL, "
            "optionally gzip-compressed."
        ) from None
    if lineno == 0:
        raise ValueError(f"Corpus file {path} contains no documents; expected {expected}.")


def iter_texts(paths: Iterable[str | Path]) -> Iterator[str]:
    """Yield the text of every document of several JSONL files, in order."""
    for path in paths:
        for obj in iter_jsonl(path):
            yield obj[TEXT_FIELD]


def write_jsonl(path: Path, texts: Iterable[str], *, compresslevel: int | None = None) -> dict:
    """Write ``{"text": ...}`` lines (ASCII-escaped) to ``path`` atomically; with ``compresslevel``, gzip with a
    zero timestamp and no name, so the same texts give the same bytes. Returns {"documents", "characters"}."""
    documents = characters = 0
    with atomic_file(Path(path)) as tmp, open(tmp, "wb") as raw:
        if compresslevel is None:
            out = raw
        else:
            out = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=compresslevel)
        with out:
            for text in texts:
                out.write((json.dumps({TEXT_FIELD: text}) + "\n").encode("ascii"))
                documents += 1
                characters += len(text)
    return {"documents": documents, "characters": characters}


def staging_directory(out_dir: str | Path) -> Path:
    """Where a resumable build of ``out_dir`` keeps what it finished until it is complete: ``.<name>.partial``."""
    out_dir = Path(out_dir)
    return out_dir.with_name(f".{out_dir.name}.partial")


@contextmanager
def atomic_directory(out_dir: str | Path, *, overwrite: bool = False, resumable: bool = False) -> Iterator[Path]:
    """Yield a staging directory beside ``out_dir``, renamed to it only on success: a fresh ``.<name>.partial-*``
    removed on failure, or with ``resumable`` ``staging_directory(out_dir)``, kept for the rerun (which must check
    what it finds)."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not overwrite:
        raise FileExistsError(
            f"Output directory {out_dir} already exists; expected a new path (or pass overwrite=True)."
        )
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    if resumable:
        tmp = staging_directory(out_dir)
        tmp.mkdir(exist_ok=True)
    else:
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.partial-", dir=out_dir.parent))
    try:
        yield tmp
        tmp.chmod(0o755)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        tmp.rename(out_dir)
    finally:
        if not resumable:
            shutil.rmtree(tmp, ignore_errors=True)


def sha256_file(path: str | Path, opener: Callable = open) -> str:
    """Hex sha256 of a file's bytes, as ``opener`` reads them (``gzip.open``: of its decompressed content)."""
    with opener(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
