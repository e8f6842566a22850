"""The shipped tiny corpora, their provenance, their export, and the build script's extraction rules."""

import gzip
import hashlib
import io
import json
import os
import re
import tarfile
from collections import Counter
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.data import tiny_documents
from pipeline.data.build_corpora import CORPORA_DIR, SOURCES, build_corpus, fetch_deb, read_deb_members, split_of
from pipeline.data.corpora import export_tiny_corpus, tiny_corpus_file, tiny_corpus_splits
from pipeline.data.files import iter_texts, sha256_file
from pipeline.data.tiny_documents import clean_fortune, html_prose

PROVENANCE = CORPORA_DIR / "PROVENANCE.md"
_OUTPUT_ROW = re.compile(
    r"^\| `(?P<file>[^`]+)` \| (?P<docs>\d+) \| (?P<chars>\d+) \| (?P<bytes>\d+) "
    r"\| (?P<sha>[0-9a-f]{64}) \| (?P<jsonl_sha>[0-9a-f]{64}) \|$",
    re.MULTILINE,
)


def _texts(name: str, split: str) -> list[str]:
    return list(iter_texts([tiny_corpus_file(name, split)]))


def _words(texts: list[str]) -> Counter:
    return Counter(w.lower() for text in texts for w in re.findall(r"[A-Za-z']+", text))


def test_shipped_files_match_provenance():
    rows = {m["file"]: m for m in _OUTPUT_ROW.finditer(PROVENANCE.read_text())}
    expected = {tiny_corpus_file(name, split).name for name in SOURCES for split in tiny_corpus_splits(name)}
    assert set(rows) == expected
    total_bytes = 0
    for file, row in rows.items():
        path = CORPORA_DIR / file
        assert sha256_file(path) == row["sha"], f"{file} differs from PROVENANCE.md"
        assert hashlib.sha256(gzip.decompress(path.read_bytes())).hexdigest() == row["jsonl_sha"]
        texts = list(iter_texts([path]))
        assert (len(texts), sum(map(len, texts))) == (int(row["docs"]), int(row["chars"]))
        total_bytes += path.stat().st_size
    assert total_bytes < 5_000_000


def test_provenance_names_pinned_sources_and_command():
    text = PROVENANCE.read_text()
    assert "python -m pipeline build-corpora --out pipeline/data/corpora" in text
    for source in SOURCES.values():
        assert f"| {source.package} | {source.version} | {source.pool_path} | {source.sha256} |" in text


@pytest.mark.parametrize(
    ("name", "splits"), [("fortunes", ("train", "validation")), ("pydocs", ("train", "validation", "test"))]
)
def test_corpus_size_splits_and_english(name, splits):
    """As the datasets they stand in for (docs/paper.md#data): WikiText-103's (pydocs) ships a test split, OWT's
    (fortunes) none; each held-out split is 2-8 % of the corpus, disjoint from the others."""
    assert tiny_corpus_splits(name) == splits
    texts = {split: _texts(name, split) for split in splits}
    train = texts["train"]
    assert 1_000_000 < sum(map(len, train + texts["validation"])) < 3_000_000
    for split, documents in texts.items():
        assert split == "train" or 0.02 < len(documents) / sum(map(len, texts.values())) < 0.08
        assert {split_of(t, SOURCES[name].test_split) for t in documents} == {split}
    assert len(set().union(*texts.values())) == sum(map(len, texts.values()))
    words = _words(train)
    assert sum(words[w] for w in ("the", "a", "of", "and", "to", "is", "in")) / sum(words.values()) > 0.12
    letters = sum(c.isalpha() or c.isspace() for t in train for c in t)
    assert letters / sum(map(len, train)) > 0.9


def test_domains_differ():
    docs, fortunes = _words(_texts("pydocs", "train")), _words(_texts("fortunes", "train"))

    def rate(words: Counter, *keys: str) -> float:
        return sum(words[k] for k in keys) / sum(words.values())

    assert rate(docs, "function", "module", "object", "returns", "argument") > 20 * rate(
        fortunes, "function", "module", "object", "returns", "argument"
    )
    assert rate(fortunes, "i", "you", "he", "she", "me", "love") > 5 * rate(docs, "i", "you", "he", "she", "me", "love")
    assert not any(line.startswith(">>>") for t in _texts("pydocs", "train") for line in t.splitlines())


@pytest.mark.parametrize(("name", "test_split"), [("fortunes", False), ("pydocs", True)])
def test_export_tiny_corpus(tmp_path, name, test_split):
    """Every shipped split, the test split only when asked."""
    out = tmp_path / name
    stats = export_tiny_corpus(name, out, test_split=test_split)
    splits = tiny_corpus_splits(name)
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", *sorted(f"{s}-00000.jsonl.gz" for s in splits)]
    for split in splits:
        texts = _texts(name, split)
        assert stats[split]["documents"] == len(texts)
        assert stats[split]["characters"] == sum(map(len, texts))
        assert stats[split]["files"] == [str((out / f"{split}-00000.jsonl.gz").resolve())]
        assert list(iter_texts(stats[split]["files"])) == texts
    assert json.loads((out / "manifest.json").read_text()) == stats
    with pytest.raises(FileExistsError, match="already exists"):
        export_tiny_corpus(name, out)
    assert "test" not in export_tiny_corpus(name, tmp_path / "not-asked")


def test_an_unknown_corpus_or_split_or_an_unshipped_test_split_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"Unknown tiny corpus 'wiki'; expected one of \['fortunes', 'pydocs'\]"):
        export_tiny_corpus("wiki", tmp_path / "x")
    with pytest.raises(
        ValueError, match=r"Unknown split 'test' of tiny corpus 'fortunes'; expected one of \['train', 'validation'\]"
    ):
        tiny_corpus_file("fortunes", "test")
    with pytest.raises(
        ValueError,
        match=r"^Tiny corpus 'fortunes' ships no test split; set test_split: false in "
        r"its dataset source or use one of \['pydocs'\]\.$",
    ):
        export_tiny_corpus("fortunes", tmp_path / "fortunes", test_split=True)


# ---- build script rules, on a synthetic package ------------------------------------------------------------

PAGE = """<html><body><div class="sphinxsidebar"><p>Navigation text</p></div>
<div class="body" role="main"><section><h1>spam — Eggs module<a class="headerlink" href="#">¶</a></h1>
<p>The <code class="docutils literal"><span class="pre">spam</span></code> module   provides
eggs.</p>
<div class="highlight-python3"><div class="highlight"><pre>&gt;&gt;&gt; import spam</pre></div></div>
<dl class="py function"><dt class="sig sig-object py">spam.fry(<em>n</em>)</dt>
<dd><p>Fry <em>n</em> eggs &amp; return them.</p></dd></dl>
<div class="admonition note"><p class="admonition-title">Note</p><p>Mind the pan.</p></div>
<table><tr><td><p>table cell</p></td></tr></table>
<p>%s</p></section></div><div class="footer"><p>Footer</p></div></body></html>"""

FORTUNES = (
    "First fortune,\nover two lines.   \n%\n"
    "_\bB_\bo_\bl_\bd and a bell\x07.\n\t\t-- Someone\n%\n"
    "First fortune,\nover two lines.\n%\n"
    "Mojibake \u00e2\u0080\u0099 here\n%\n"
    "\n%\n"
    "Last one"
)


def _deb(path: Path, files: dict[str, bytes]) -> Path:
    """Write a minimal .deb: an ar archive holding debian-binary and data.tar.xz."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo("./" + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    members = [("debian-binary", b"2.0\n"), ("data.tar.xz", buffer.getvalue())]
    out = b"!<arch>\n"
    for name, data in members:
        out += f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(data):<10}`\n".encode() + data
        out += b"\n" if len(data) % 2 else b""
    path.write_bytes(out)
    return path


def _read_all(folder: Path, name: str) -> list[str]:
    """Texts of every split (any may be empty for a synthetic package)."""
    files = [folder / f"{name}.{split}.jsonl.gz" for split in tiny_corpus_splits(name)]
    lines = [line for path in files for line in gzip.open(path, "rt")]
    return [json.loads(line)["text"] for line in lines]


def test_html_prose_keeps_paragraphs_drops_code():
    assert html_prose(PAGE % "Last words.") == [
        "spam — Eggs module",
        "The spam module provides eggs.",
        "Fry n eggs & return them.",
        "Mind the pan.",
        "Last words.",
    ]


def test_clean_fortune():
    assert clean_fortune("_\bB_\bo_\bl_\bd\x07 text  \n\t-- Me\n\n") == "Bold text\n\t-- Me"
    assert clean_fortune("a \u00e2\u0080\u0099 b") is None
    assert clean_fortune(" \n\n") is None


def test_build_corpus_from_package_is_deterministic(tmp_path, monkeypatch):
    monkeypatch.setattr(tiny_documents, "PYDOCS_MIN_CHARS", 20)
    html = SOURCES["pydocs"].member_prefix
    long_paragraph = "A long paragraph about eggs. " * 500
    pages = {
        f"{html}library/spam.html": (PAGE % long_paragraph).encode(),
        f"{html}tutorial/intro.html": (PAGE % "Tutorial words.").encode(),
        f"{html}whatsnew/3.11.html": (PAGE % "Excluded section.").encode(),
        f"{html}library/index.html": b'<div role="main"><p>Tiny.</p></div>',
    }
    docs_deb = _deb(tmp_path / "docs.deb", pages)
    games = SOURCES["fortunes"].member_prefix
    fortunes_deb = _deb(
        tmp_path / "fortunes.deb",
        {f"{games}people": FORTUNES.encode(), f"{games}people.dat": b"\0\1", f"{games}ascii-art": b"<o>\n%\n"},
    )
    assert sorted(read_deb_members(fortunes_deb, games)) == [
        f"{games}{n}" for n in ("ascii-art", "people", "people.dat")
    ]

    outputs = []
    for run in ("a", "b"):
        out = tmp_path / run
        out.mkdir()
        stats = {
            "pydocs": build_corpus("pydocs", docs_deb, out),
            "fortunes": build_corpus("fortunes", fortunes_deb, out),
        }
        outputs.append({p.name: p.read_bytes() for p in out.iterdir()})
    assert outputs[0] == outputs[1]

    fortunes = _read_all(tmp_path / "a", "fortunes")
    assert sorted(fortunes) == sorted(
        ["First fortune,\nover two lines.", "Bold and a bell.\n\t\t-- Someone", "Last one"]
    )
    docs = _read_all(tmp_path / "a", "pydocs")
    assert len(docs) == 2 and all(len(d) <= tiny_documents.PYDOCS_MAX_CHARS for d in docs)
    assert any(d.endswith("Tutorial words.") for d in docs)
    assert stats["fortunes"]["train"]["documents"] + stats["fortunes"]["validation"]["documents"] == 3


def test_fetch_deb_rejects_wrong_hash(tmp_path):
    source = SOURCES["fortunes"]
    (tmp_path / Path(source.pool_path).name).write_bytes(b"tampered")
    with pytest.raises(ValueError, match=f"has sha256 .*; expected the pinned {source.sha256}"):
        fetch_deb(source, tmp_path)


def test_read_deb_rejects_non_deb(tmp_path):
    (tmp_path / "x.deb").write_bytes(b"PK\3\4 a zip")
    with pytest.raises(ValueError, match=r"x\.deb is not an ar archive; expected a Debian binary package"):
        read_deb_members(tmp_path / "x.deb", "usr/")


@pytest.mark.skipif(
    not os.environ.get("PIPELINE_DEB_DIR"), reason="set PIPELINE_DEB_DIR to a folder with the pinned .deb files"
)
def test_full_rebuild_matches_shipped_files():
    assert main(["build-corpora", "--deb-dir", os.environ["PIPELINE_DEB_DIR"], "--check"]) == 0
