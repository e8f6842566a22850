"""One stop path (pipeline/execution/stop_signals.py): the signals are named in one module, and one context manager
takes the first of them once and gives the handlers back."""

import ast
import os
import signal
from pathlib import Path

from pipeline.execution.stop_signals import JOB_STOP_SIGNALS, StopSignals

ROOT = Path(__file__).resolve().parents[1]
NOT_SIGNALS = {  # handler values and pthread_sigmask modes
    "SIG_DFL",
    "SIG_IGN",
    "SIG_BLOCK",
    "SIG_UNBLOCK",
    "SIG_SETMASK",
}


def named_signals(path: Path) -> set[str]:
    """The signals a module names (``signal.SIGTERM``, ``from signal import SIGINT``), not the handler values."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "signal":
            found.add(node.attr)
        elif isinstance(node, ast.ImportFrom) and node.module == "signal":
            found |= {alias.name for alias in node.names}
    return {name for name in found if name.startswith("SIG") and name not in NOT_SIGNALS}


def test_the_stop_signals_are_named_in_one_module():
    naming = {
        str(path.relative_to(ROOT)): sorted(names)
        for path in sorted((ROOT / "pipeline").rglob("*.py"))
        if (names := named_signals(path))
    }
    assert list(naming) == ["pipeline/execution/stop_signals.py"], naming


def test_the_first_stop_signal_is_taken_once_the_rest_ignored_and_the_handlers_come_back():
    taken = []
    before = {number: signal.getsignal(number) for number in JOB_STOP_SIGNALS}
    with StopSignals(taken.append) as stop:
        os.kill(os.getpid(), signal.SIGURG)
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
    assert taken == ["SIGURG"] and stop.signal_name == "SIGURG"
    assert {number: signal.getsignal(number) for number in JOB_STOP_SIGNALS} == before
