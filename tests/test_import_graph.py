"""The import graph of ``pipeline/``: no circle, no import from a lower floor up; and no long module or workflow file
(``workflow/``) without a reason.

Every ``import``/``from ... import`` of the package counts, at file level or inside a function (a lazy import is an
arrow too). A module stands on the floor of the first entry of ``FLOORS`` that names it or a package above it; it
may import its own floor and the floors below. ``pipeline.x.commands`` modules are verbs (the CLI), the top floor.
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pipeline"

FLOORS = [
    # 0: leaves: names, digests, the environment a job reads, phase markers, failure sentences, stop signals
    [
        "pipeline.config.families",
        "pipeline.train.digests",
        "pipeline.execution.job_env",
        "pipeline.execution.phases",
        "pipeline.execution.errors",
        "pipeline.train.step_plan",
        "pipeline.execution.stop_signals",
        "pipeline.execution.driver_stop",
    ],
    # 1: presets and the site file, and the run-folder files every stage writes
    ["pipeline.config", "pipeline.artifacts"],
    # 2: running a verb's work as a Ray task, in a warm worker or a fresh one (the rest of the package: floor 0)
    ["pipeline.execution"],
    # 3: models and data
    ["pipeline.models", "pipeline.data"],
    # 4: training and evaluation of runs
    ["pipeline.train", "pipeline.evaluate"],
    # 5: what reads trained runs, and what plans them
    ["pipeline.analysis", "pipeline.planning"],
    # 6: the report of everything, the pipeline's own benchmarks, and the preflight (which trains and plans)
    ["pipeline.report", "pipeline.bench", "pipeline.preflight"],
    # 7: verbs: the command line
    ["pipeline.commands", "pipeline.cli", "pipeline.__main__", "*.commands"],
]
MAX_LINES = 300
REASON = "Longer than 300 lines because"
"""A module over ``MAX_LINES`` lines says why in its docstring, in a sentence starting with these words."""


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """The ``pipeline`` modules a file imports, anywhere in it (``from pipeline.x import y`` counts as
    ``pipeline.x.y`` when that is a module, else ``pipeline.x``)."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], base]).strip(".")
            found |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names}
    return {name for name in found if name == "pipeline" or name.startswith("pipeline.")}


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}
GRAPH = {name: imports(path) - {name} for name, path in MODULES.items()}


def floor(name: str) -> int:
    for number, entries in enumerate(FLOORS):
        for entry in entries:
            if name == entry or name.startswith(entry + ".") or (entry == "*.commands" and name.endswith(".commands")):
                return number
    raise AssertionError(f"{name} is on no floor of FLOORS; add it to the floor it belongs to")


def floor_of(name: str) -> int:
    """A module's floor; a ``*.commands`` verb module is on the top floor whatever its package."""
    return len(FLOORS) - 1 if name.endswith(".commands") else floor(name)


def circles() -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in GRAPH.get(node, ()):
            if target not in MODULES:
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(MODULES):
        if node not in index:
            visit(node)
    return sorted(groups)


def test_no_import_circle():
    found = circles()
    assert not found, "import circles (each group imports itself back):\n" + "\n".join(map(", ".join, found))


def test_no_module_imports_from_a_floor_above_its_own():
    upward = [
        f"{name} (floor {floor_of(name)}) imports {target} (floor {floor_of(target)})"
        for name, targets in sorted(GRAPH.items())
        for target in sorted(targets)
        if target != "pipeline" and floor_of(target) > floor_of(name)
    ]
    assert not upward, "imports from a lower floor up:\n" + "\n".join(upward)


WORKFLOW_FILES = {
    str(path.relative_to(ROOT)): path for path in [ROOT / "workflow" / "Snakefile", *(ROOT / "workflow").rglob("*.smk")]
}
"""The workflow's files: Snakemake's syntax, held to the same length rule as the package's modules."""


def opening_docstring(path: Path) -> str:
    """A file's docstring, its words joined by single spaces (a Snakefile opens with one as a module does)."""
    match = re.match(r'\s*"""(.*?)"""', path.read_text(), re.S)
    return " ".join(match.group(1).split()) if match else ""


def test_a_module_or_workflow_file_over_300_lines_says_why_at_its_top():
    long = [
        f"{name}: {lines} lines"
        for name, path in sorted({**MODULES, **WORKFLOW_FILES}.items())
        if (lines := len(path.read_text().splitlines())) > MAX_LINES and REASON not in opening_docstring(path)
    ]
    reason = f"files over {MAX_LINES} lines whose docstring does not say why ({REASON} ...):"
    assert not long, "\n".join([reason, *long])
