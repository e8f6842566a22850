"""The documentation site builds in MkDocs' strict mode, and every relative link and section it, the README or the
code cites resolves."""

import os
import re
import subprocess
import sys
from pathlib import Path

from markdown.extensions.toc import slugify

ROOT = Path(__file__).resolve().parent.parent
PAGES = "index configuration runs cluster planning experiments models failures testing paper".split()
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CITATION = re.compile(r"docs/([\w-]+\.md)(?:#([\w-]+))?")


def prose_lines(path: Path) -> list[str]:
    """The lines of a Markdown file outside fenced code blocks."""
    lines, fenced = [], False
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def anchors(path: Path) -> set[str]:
    """The ids MkDocs (Python-Markdown's toc) gives the headings of ``path``."""
    ids = set()
    for line in prose_lines(path):
        if match := re.match(r"#{1,6}\s+(.*?)\s*#*$", line):
            slug = base = slugify(match[1].replace("`", "").replace("*", ""), "-")
            count = 0
            while slug in ids:
                count += 1
                slug = f"{base}_{count}"
            ids.add(slug)
    return ids


def broken_target(source: Path, target: str) -> str | None:
    """Why ``target``, linked from ``source``, does not resolve (None when it does)."""
    where, _, anchor = target.partition("#")
    path = (source.parent / where).resolve() if where else source
    if not path.exists():
        return f"{target}: no such file"
    if anchor and path.suffix == ".md" and anchor not in anchors(path):
        return f"{target}: no section #{anchor} in {path.relative_to(ROOT)}"
    return None


def test_mkdocs_builds_in_strict_mode(tmp_path):
    """Strict: a broken link, anchor or a page missing from the nav fails the build (``validation`` in mkdocs.yml)."""
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "site" / "paper" / "index.html").is_file()


def relative_links(source: Path) -> list[str]:
    """The targets of ``source``'s Markdown links that are not URLs."""
    return [target for line in prose_lines(source) for target in LINK.findall(line) if not re.match(r"[a-z]+:", target)]


def test_the_readme_links_every_docs_page_and_every_relative_link_resolves():
    """Every page of ``PAGES`` is linked from the README, so it exists: a link to a missing page is broken."""
    linked = {target.partition("#")[0] for target in relative_links(ROOT / "README.md")}
    unlinked = [page for page in PAGES if f"docs/{page}.md" not in linked]
    broken = [
        f"{source.relative_to(ROOT)}: {reason}"
        for source in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
        for target in relative_links(source)
        if (reason := broken_target(source, target))
    ]
    assert unlinked == [] and broken == []


def test_every_paper_fact_the_code_cites_is_a_section_of_the_docs():
    """Code, presets and tests cite docs/<page>.md#<section>, never a document outside the repository."""
    sources = [
        path
        for folder in ("pipeline", "workflow", "tests", "profiles")
        for path in (ROOT / folder).rglob("*")
        if path.is_file()
        and path.suffix in {".py", ".smk", ".yaml", ".csv", ".rst", ".md", ""}
        and path != Path(__file__).resolve()
    ]
    outside, broken = [], []
    for path in sources:
        text = path.read_text(errors="replace")
        where = path.relative_to(ROOT)
        outside += [f"{where}: experiment-facts"] * ("experiment-facts" in text)
        for page, section in CITATION.findall(text):
            target = f"{page}#{section}" if section else page
            if reason := broken_target(ROOT / "docs" / "index.md", target):
                broken.append(f"{where}: {reason}")
    assert outside == [] and broken == []
