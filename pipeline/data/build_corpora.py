"""Build the shipped tiny corpora, byte-for-byte reproducibly, from version-pinned Debian packages.

    python -m pipeline build-corpora                # apt-get download, build into pipeline/data/corpora
    python -m pipeline build-corpora --deb-dir DIR  # use (or download into) DIR for the .deb files
    python -m pipeline build-corpora --check        # rebuild in a temp dir, compare with shipped files

The .debs are read with the standard library (ar + tar, no ``dpkg``) after checking their sha256 pins."""

import gzip
import hashlib
import io
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pipeline.data import tiny_documents as rules
from pipeline.data.files import sha256_file, write_jsonl

CORPORA_DIR = Path(__file__).resolve().parent / "corpora"
VALIDATION_MODULUS = 20  # sha256(text) % 20 == 0: validation (~5 %); == 1: test (~5 %) where the corpus has one
GZIP_LEVEL = 9


@dataclass(frozen=True)
class DebSource:
    """A Debian binary package pinned by version and sha256."""

    package: str
    version: str
    pool_path: str
    sha256: str
    licence: str
    member_prefix: str
    test_split: bool = False
    """Whether the corpus ships a test split, as the dataset it stands in for has (WikiText-103 does, OpenWebText
    does not; docs/paper.md#data and docs/paper.md#fine-tune-test-split)."""

    @property
    def splits(self) -> tuple[str, ...]:
        """The splits the corpus ships: train, validation, and test where it has a test split."""
        return ("train", "validation", "test") if self.test_split else ("train", "validation")


SOURCES = {
    "pydocs": DebSource(
        package="python3.11-doc",
        version="3.11.2-6+deb12u8",
        pool_path="pool/main/p/python3.11/python3.11-doc_3.11.2-6+deb12u8_all.deb",
        sha256="50eb63e7f636c4281e9ce1b8f10386f1def42159eddce34fc1f41c46261df71b",
        licence="PSF-2.0 (Python Software Foundation License, the licence of the Python documentation; "
        "see /usr/share/doc/python3.11-doc/copyright)",
        member_prefix="usr/share/doc/python3.11/html/",
        test_split=True,
    ),
    "fortunes": DebSource(
        package="fortunes",
        version="1:1.99.1-7.3",
        pool_path="pool/main/f/fortune-mod/fortunes_1.99.1-7.3_all.deb",
        sha256="41d0551dc0ff52f875a2ecef7c39da2f672ab468c37e170119f7e0245a9d63c5",
        licence="BSD-3-Clause (fortune-mod; Debian main, see /usr/share/doc/fortunes/copyright)",
        member_prefix="usr/share/games/fortunes/",
    ),
}
"""The tiny corpora: ``pydocs``, Python 3.11 documentation prose (library reference, tutorial, language reference,
HOWTOs, FAQ: encyclopedic/technical, the stand-in for WikiText-103), and ``fortunes``, Debian fortune cookies (quotes,
jokes, anecdotes, poems, literature: informal/narrative, the stand-in for OpenWebText)."""


def read_deb_members(deb: Path, prefix: str) -> dict[str, bytes]:
    """Regular files under `prefix` in the data archive of a .deb (an `ar` archive holding data.tar.*)."""
    data = deb.read_bytes()
    if not data.startswith(b"!<arch>\n"):
        raise ValueError(f"Package {deb} is not an ar archive; expected a Debian binary package (.deb).")
    pos = 8
    while pos + 60 <= len(data):
        header = data[pos : pos + 60]
        name = header[:16].decode("ascii").strip().rstrip("/")
        size = int(header[48:58].decode("ascii"))
        body = data[pos + 60 : pos + 60 + size]
        pos += 60 + size + size % 2
        if name.startswith("data.tar"):
            with tarfile.open(fileobj=io.BytesIO(body), mode="r:*") as tar:
                members = {}
                for member in tar.getmembers():
                    path = member.name.removeprefix("./")
                    if member.isfile() and path.startswith(prefix):
                        members[path] = tar.extractfile(member).read()
                return members
    raise ValueError(f"Package {deb} has no data.tar member; expected a Debian binary package (.deb).")


def split_of(text: str, with_test: bool) -> str:
    """Deterministic split by sha256 of the UTF-8 text, read as an integer h: validation when h % 20 == 0 (~5 %),
    test when h % 20 == 1 and the corpus has a test split (~5 %), otherwise train."""
    remainder = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest(), "big") % VALIDATION_MODULUS
    if remainder == 0:
        return "validation"
    return "test" if with_test and remainder == 1 else "train"


def corpus_filename(name: str, split: str) -> str:
    """Shipped file name of one split of one tiny corpus."""
    return f"{name}.{split}.jsonl.gz"


def fetch_deb(source: DebSource, deb_dir: Path) -> Path:
    """Path of the pinned .deb in `deb_dir`, downloaded with `apt-get download` if absent; sha256-checked."""
    deb = deb_dir / Path(source.pool_path).name
    if not deb.exists():
        subprocess.run(["apt-get", "download", f"{source.package}={source.version}"], cwd=deb_dir, check=True)
        downloaded = sorted(deb_dir.glob(f"{source.package}_*.deb"))
        if len(downloaded) != 1:
            raise FileNotFoundError(f"apt-get download left {downloaded} in {deb_dir}; expected {deb.name}.")
        downloaded[0].rename(deb)
    digest = sha256_file(deb)
    if digest != source.sha256:
        raise ValueError(f"Package {deb} has sha256 {digest}; expected the pinned {source.sha256}.")
    return deb


def build_corpus(name: str, deb: Path, out_dir: Path) -> dict[str, dict]:
    """Extract, split (by ``split_of``, keeping their order) and write one tiny corpus; returns per-split stats and
    hashes."""
    source = SOURCES[name]
    splits: dict[str, list[str]] = {split: [] for split in source.splits}
    for text in rules.DOCUMENTS[name](read_deb_members(deb, source.member_prefix), source.member_prefix):
        splits[split_of(text, source.test_split)].append(text)
    stats = {}
    for split, texts in splits.items():
        path = out_dir / corpus_filename(name, split)
        stats[split] = write_jsonl(path, texts, compresslevel=GZIP_LEVEL)
        stats[split]["bytes"] = path.stat().st_size
        stats[split]["sha256"] = sha256_file(path)
        stats[split]["jsonl_sha256"] = sha256_file(path, gzip.open)
    return stats


_PROVENANCE = """\
# Tiny corpora: provenance

Two small real-English corpora of clearly different domains, shipped so that the pipeline runs offline:
`pydocs` (encyclopedic/technical reference prose, standing in for WikiText-103) and `fortunes` (informal
quotes, jokes, anecdotes and poems, standing in for OpenWebText). Files are gzip-compressed JSONL, one
`{{"text": ...}}` document per line, ASCII-escaped. This file is written by the build script; do not edit it.

## Build command

```
python -m pipeline build-corpora --out pipeline/data/corpora
```

It runs `apt-get download <package>=<version>` (Debian 12 bookworm) unless `--deb-dir` holds the .deb
files, checks their sha256, reads them with the Python standard library (no dpkg) and writes byte-identical
output on every run. `--check` rebuilds into a temporary directory and compares the decompressed content
(the gzip bytes themselves could only differ with a different zlib).

## Sources

| corpus | Debian package | version | archive path | .deb sha256 | licence |
|---|---|---|---|---|---|
{sources}

Archived copies of these exact versions: https://snapshot.debian.org/ (by package name and version).

## Extraction rules

- `pydocs`: every HTML page of `{pydocs_prefix}` under {pydocs_sections}, sorted by path.
  One document per page: the text of its headings and paragraphs inside the Sphinx main body,
  whitespace-normalised, one block per paragraph (blank line between); code blocks, signatures, tables,
  navigation and permalink marks are dropped. Each page is cut at the last paragraph boundary before
  {max_chars} characters; pages under {min_chars} characters are dropped.
- `fortunes`: every data file of `{fortunes_prefix}` except {fortunes_excluded}, sorted by name,
  split on `%` lines. One document per fortune; nroff overstrikes and control characters removed,
  trailing blanks stripped, fortunes with doubly-encoded UTF-8 dropped, exact duplicates dropped.
- Split: a document goes to validation when sha256(UTF-8 text), read as a big-endian integer, is divisible
  by {modulus} (~5 %); in a corpus with a test split ({test_corpora}, as WikiText-103 has one and OpenWebText
  has none) to test when that integer is 1 modulo {modulus} (~5 %); otherwise to train. Order within a split
  follows the source order.

## Outputs

| file | documents | characters | bytes | sha256 | sha256 of decompressed JSONL |
|---|---|---|---|---|---|
{outputs}
"""


def provenance_markdown(stats: dict[str, dict[str, dict]]) -> str:
    """The PROVENANCE.md text for the built corpora."""
    sources = [
        f"| {name} | {s.package} | {s.version} | {s.pool_path} | {s.sha256} | {s.licence} |"
        for name, s in SOURCES.items()
    ]
    outputs = [
        f"| `{corpus_filename(name, split)}` | {s['documents']} | {s['characters']} | {s['bytes']} "
        f"| {s['sha256']} | {s['jsonl_sha256']} |"
        for name, splits in stats.items()
        for split, s in splits.items()
    ]
    return _PROVENANCE.format(
        sources="\n".join(sources),
        pydocs_prefix=SOURCES["pydocs"].member_prefix,
        pydocs_sections=", ".join(f"`{s}`" for s in rules.PYDOCS_SECTIONS),
        max_chars=rules.PYDOCS_MAX_CHARS,
        min_chars=rules.PYDOCS_MIN_CHARS,
        fortunes_prefix=SOURCES["fortunes"].member_prefix,
        fortunes_excluded=", ".join(f"`{s}`" for s in sorted(rules.FORTUNES_EXCLUDED)),
        modulus=VALIDATION_MODULUS,
        test_corpora=", ".join(f"`{name}`" for name, source in SOURCES.items() if source.test_split),
        outputs="\n".join(outputs),
    )


def rebuild(out: Path, deb_dir: Path | None, check: bool) -> dict[str, dict[str, dict[str, int]]]:
    """Build every corpus and PROVENANCE.md into ``out`` (.debs in ``deb_dir``), or with ``check`` into a temporary
    folder compared with ``out``; returns documents and characters per corpus and split."""
    with tempfile.TemporaryDirectory() as scratch:
        deb_dir = deb_dir or Path(scratch) / "debs"
        deb_dir.mkdir(parents=True, exist_ok=True)
        target = Path(scratch) / "built" if check else out
        target.mkdir(parents=True, exist_ok=True)
        stats = {name: build_corpus(name, fetch_deb(source, deb_dir), target) for name, source in SOURCES.items()}
        (target / "PROVENANCE.md").write_text(provenance_markdown(stats), encoding="utf-8")
        if check:
            files = [corpus_filename(name, split) for name, source in SOURCES.items() for split in source.splits]
            differing = [f for f in files if sha256_file(target / f, gzip.open) != sha256_file(out / f, gzip.open)]
            if differing:
                raise ValueError(
                    f"{out}: {', '.join(differing)} differ from a rebuild; run build-corpora without "
                    "--check to rewrite them."
                )
    return stats
