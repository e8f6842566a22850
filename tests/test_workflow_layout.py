"""The workflow's files: each stage's include reads only what common.smk and targets.smk define (so the include order
of the stages does not matter), and every file is formatted by snakefmt."""

import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / "workflow"
SHARED = ("common.smk", "targets.smk")
"""Included first, in this order: the preset, the output layout and the targets every stage may read."""
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


def test_no_include_reads_a_name_another_stage_defines():
    stages = {
        path.name: path.read_text() for path in sorted((WORKFLOW / "rules").glob("*.smk")) if path.name not in SHARED
    }
    shared = set().union(*(defined_names((WORKFLOW / "rules" / name).read_text()) for name in SHARED))
    defined = {name: defined_names(text) - shared for name, text in stages.items()}
    borrowed = []
    for reader, text in [*stages.items(), ("Snakefile", (WORKFLOW / "Snakefile").read_text())]:
        own = defined.get(reader, set()) | defined_names(text)
        for owner, names in defined.items():
            if owner != reader:
                borrowed += [f"{reader} reads {name} from {owner}" for name in sorted((used_names(text) & names) - own)]
    assert not borrowed, borrowed


def test_snakefmt_is_clean():
    result = subprocess.run(
        [sys.executable, "-m", "snakefmt", "--check", "--diff", "workflow"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
