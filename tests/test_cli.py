"""`python -m pipeline` is the one way in: no module of the package runs as a script of its own, and every command
the documentation gives names a verb that `--help` lists."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUBPROCESS_WORKERS = {"pipeline/bench/fit.py"}
"""Modules a verb starts as a child process (``fit``: one XLA plan per process), not commands for a person."""
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "pipeline").rglob("*.py")), *sorted((ROOT / "pipeline").rglob("*.md")),
             *sorted((ROOT / "workflow").rglob("*.smk")), ROOT / "workflow" / "Snakefile"]
COMMAND = re.compile(r"python -m pipeline(\.[\w.]+)?(?: ([a-z][\w-]*))?(?: ([a-z][\w-]*))?")


def listed_choices(*args: str) -> set[str]:
    """The subcommands ``python -m pipeline <args> --help`` lists."""
    result = subprocess.run([sys.executable, "-m", "pipeline", *args, "--help"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return set(re.search(r"\{([\w,-]+)\}", result.stdout).group(1).split(","))


def test_no_module_but_the_cli_runs_as_a_script():
    scripts = {str(path.relative_to(ROOT)) for path in (ROOT / "pipeline").rglob("*.py")
               if path.name != "__main__.py" and 'if __name__ == "__main__"' in path.read_text()}
    assert scripts <= SUBPROCESS_WORKERS, f"not verbs of `python -m pipeline`: {sorted(scripts - SUBPROCESS_WORKERS)}"


def test_every_documented_command_is_a_verb_listed_by_help():
    verbs, benchmarks = listed_choices(), listed_choices("bench")
    assert {"cost", "fit", "bench", "build-corpora", "build-tasks"} <= verbs
    assert {"throughput", "throughput-sizes", "jacobian", "dag"} <= benchmarks
    unlisted = []
    for path in DOCUMENTS:
        for module, verb, benchmark in COMMAND.findall(path.read_text()):
            where = f"{path.relative_to(ROOT)}: python -m pipeline{module} {verb} {benchmark}".rstrip()
            if module:
                if f"pipeline/{module[1:].replace('.', '/')}.py" not in SUBPROCESS_WORKERS:
                    unlisted.append(where)
            elif verb and (verb not in verbs or (verb == "bench" and benchmark and benchmark not in benchmarks)):
                unlisted.append(where)
    assert not unlisted, unlisted
