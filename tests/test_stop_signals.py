"""One stop path (pipeline/execution/stop_signals.py): the signals are named in one module, one context manager
takes the first of them once and gives the handlers back, and a stop asked twice ends its task as a stop."""

import ast
import os
import signal
from pathlib import Path

from pipeline.execution.errors import STOPPED_AT, RunStopped
from pipeline.execution.stop_signals import JOB_STOP_SIGNALS, StopSignals
from pipeline.execution.warm_workers import marked_task

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


def stopped_twice():
    """A job that takes SLURM's walltime warning (SIGURG) in its loop and stops, and whose driver's own request to
    stop (``ray.cancel``: SIGINT) lands as that stop unwinds."""
    try:
        with StopSignals() as stop:
            os.kill(os.getpid(), signal.SIGURG)
        raise RunStopped(f"stopped on request ({stop.signal_name}: SLURM's walltime warning) after 3 of 9 updates")
    finally:
        os.kill(os.getpid(), signal.SIGINT)


def test_a_stop_asked_again_while_the_job_stops_ends_its_task_with_the_stop_not_an_interruption():
    try:
        marked_task(f"{__name__}:stopped_twice")()
    except BaseException as error:  # noqa: BLE001  (on the old code a KeyboardInterrupt, which must not end pytest)
        outcome = error
    assert isinstance(outcome, RunStopped) and STOPPED_AT.search(str(outcome)), repr(outcome)
