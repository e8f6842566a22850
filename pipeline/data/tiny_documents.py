"""What a document is in each tiny corpus: the extraction rules that turn the files of its pinned Debian package
(``pipeline.data.build_corpora``) into documents, stated again in the corpora's PROVENANCE.md."""

import re
from collections.abc import Callable
from html.parser import HTMLParser

# ---- pydocs: prose paragraphs of the Python 3.11 documentation -------------------------------------------

PYDOCS_SECTIONS = ("library/", "tutorial/", "reference/", "howto/", "faq/", "glossary.html")
PYDOCS_MIN_CHARS = 500  # drops chapter index pages that are little more than a title
PYDOCS_MAX_CHARS = 12_000  # each page is cut at the last paragraph boundary before this many characters
_VOID_TAGS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}
_SKIPPED_TAGS = {"pre", "script", "style", "table", "nav"}
_BLOCK_TAGS = {"p", "h1", "h2", "h3", "h4", "h5", "h6"}


class _ProseExtractor(HTMLParser):
    """Collect the text of headings and paragraphs inside Sphinx's main body, skipping code and tables."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[str] = []
        self._stack: list[str] = []
        self._body_depth: int | None = None
        self._skip_depth: int | None = None
        self._block: tuple[str, list[str]] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID_TAGS:
            return
        attributes = dict(attrs)
        classes = (attributes.get("class") or "").split()
        self._stack.append(tag)
        depth = len(self._stack)
        if tag == "div" and attributes.get("role") == "main":
            self._body_depth = depth
        skipped = (
            tag in _SKIPPED_TAGS
            or (tag == "dt" and "sig" in classes)
            or (tag == "a" and "headerlink" in classes)
            or (tag == "p" and "admonition-title" in classes)
            or (tag == "div" and any(c.startswith("highlight") for c in classes))
        )
        if skipped and self._skip_depth is None:
            self._skip_depth = depth
        if tag in _BLOCK_TAGS and self._body_depth is not None and self._skip_depth is None:
            self._block = (tag, [])

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID_TAGS or tag not in self._stack:
            return
        while self._stack:
            depth = len(self._stack)
            closed = self._stack.pop()
            if self._skip_depth == depth:
                self._skip_depth = None
            if self._body_depth == depth:
                self._body_depth = None
            if self._block is not None and closed == self._block[0]:
                text = " ".join("".join(self._block[1]).split())
                if text:
                    self.blocks.append(text)
                self._block = None
            if closed == tag:
                break

    def handle_data(self, data: str) -> None:
        if self._block is not None and self._skip_depth is None:
            self._block[1].append(data)


def html_prose(html: str) -> list[str]:
    """Headings and paragraphs (whitespace-normalised) of one Sphinx HTML page, without code or tables."""
    parser = _ProseExtractor()
    parser.feed(html)
    parser.close()
    return parser.blocks


def _truncate(blocks: list[str], max_chars: int) -> str:
    kept: list[str] = []
    size = 0
    for block in blocks:
        size += len(block) + (2 if kept else 0)
        if size > max_chars and kept:
            break
        kept.append(block)
    return "\n\n".join(kept)


def pydocs_documents(members: dict[str, bytes], prefix: str) -> list[str]:
    """One document per documentation page under ``prefix`` (sorted by path): its prose, cut to PYDOCS_MAX_CHARS."""
    texts = (
        _truncate(html_prose(members[name].decode("utf-8")), PYDOCS_MAX_CHARS)
        for name in sorted(members)
        if name.endswith(".html") and name.removeprefix(prefix).startswith(PYDOCS_SECTIONS)
    )
    return [text for text in texts if len(text) >= PYDOCS_MIN_CHARS]


# ---- fortunes: one fortune cookie per document ------------------------------------------------------------

FORTUNES_EXCLUDED = {"ascii-art"}  # pictures, not prose
_OVERSTRIKE = re.compile(r".\x08")  # "_\bx" underlining / "x\bx" bold from nroff-era files
_MOJIBAKE = re.compile(r"[\x80-\x9f]")  # C1 controls only occur in doubly-encoded UTF-8
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_SEPARATOR = re.compile(r"^%\n", flags=re.MULTILINE)


def clean_fortune(raw: str) -> str | None:
    """Strip overstrikes, control characters and trailing blanks; None for mojibake or empty fortunes."""
    text = _OVERSTRIKE.sub("", raw)
    if _MOJIBAKE.search(text):
        return None
    text = _CONTROL.sub("", text)
    text = "\n".join(line.rstrip() for line in text.split("\n")).strip("\n")
    return text if text.strip() else None


def fortunes_documents(members: dict[str, bytes], prefix: str) -> list[str]:
    """Every distinct fortune of every data file under ``prefix`` (sorted by file name, then file order)."""
    fortunes: list[str | None] = []
    for name in sorted(members):
        stem = name.removeprefix(prefix)
        if "/" not in stem and "." not in stem and stem not in FORTUNES_EXCLUDED:
            fortunes += map(clean_fortune, _SEPARATOR.split(members[name].decode("utf-8")))
    return list(dict.fromkeys(text for text in fortunes if text is not None))


DOCUMENTS: dict[str, Callable[[dict[str, bytes], str], list[str]]] = {
    "pydocs": pydocs_documents,
    "fortunes": fortunes_documents,
}
"""Each tiny corpus's documents from its package's files (``member path -> bytes``) under the member prefix."""
