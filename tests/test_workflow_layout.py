"""The workflow's files: each stage's include reads only what the shared files (common.smk, resources.smk,
targets.smk) define, so the include order of the stages does not matter, and a shared file reads nothing defined after
it (snakefmt's format: tests/test_lint.py)."""

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / "workflow"
SHARED = ("common.smk", "resources.smk", "targets.smk")
"""Included first, in this order: the preset, each rule's resources, the output layout and the targets every stage
may read."""
INCLUDE = re.compile(r'^include: "([\w.]+)"$', re.M)
"""A rules file's include of a file beside it (Snakemake's ``include:`` resolves it relative to the includer)."""
DEFINITION = re.compile(r"^(?:def (\w+)|(\w+) =|import (\w+)|from \S+ import \(?([\w, ]+)\)?)", re.M)


def defined_names(text: str) -> set[str]:
    """Top-level names a workflow file defines: functions, assignments and imports."""
    names = set()
    for function, variable, module, imported in DEFINITION.findall(text):
        names |= {function, variable, module} | {name.strip() for name in imported.split(",")}
    return names - {""}


def used_names(text: str) -> set[str]:
    """Every name a workflow file reads, inside f-string fields included."""
    names = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.NAME:
            names.add(token.string)
        elif token.type == tokenize.STRING and token.string.lstrip("rbRB").startswith(("f", "F")):
            names |= set(re.findall(r"(?<!\{)\{([A-Za-z_]\w*)", token.string))
    return names


def test_no_include_reads_a_name_another_stage_or_a_later_shared_file_defines():
    """A stage reads what it, the files it includes and the shared files define; a shared file, what it and the
    shared files before it define (never a global of a file Snakemake reads after it)."""
    files = {path.name: path.read_text() for path in sorted((WORKFLOW / "rules").glob("*.smk"))}
    definitions = {name: defined_names(text) for name, text in files.items()}
    borrowed = []
    for reader, text in [*files.items(), ("Snakefile", (WORKFLOW / "Snakefile").read_text())]:
        before = SHARED[: SHARED.index(reader)] if reader in SHARED else SHARED
        included = INCLUDE.findall(text) if reader in files else []
        own = defined_names(text).union(*(definitions[name] for name in [*before, *included]))
        for owner, names in definitions.items():
            if owner != reader:
                borrowed += [f"{reader} reads {name} from {owner}" for name in sorted((used_names(text) & names) - own)]
    assert not borrowed, borrowed
