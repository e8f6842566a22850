"""``python -m pipeline <verb> ...``: the only entry point the Snakemake rules use. It gathers the verbs each stage
declares in ``pipeline/<stage>/commands.py``; verbs import JAX, Levanter or Ray only inside their work."""

import argparse
import functools
import logging
import re
import sys
import traceback

from pipeline.analysis import commands as analysis_commands
from pipeline.bench import commands as bench_commands
from pipeline.data import commands as data_commands
from pipeline.evaluate import commands as evaluate_commands
from pipeline.execution.errors import failure_sentence, subject
from pipeline.execution.job_env import export_torch_switch
from pipeline.execution.phases import LOG_FORMAT, mark_phase, process_start_time
from pipeline.planning import commands as planning_commands
from pipeline.preflight import commands as preflight_commands
from pipeline.report import commands as report_commands
from pipeline.train import commands as train_commands

STAGES = (
    data_commands,
    train_commands,
    evaluate_commands,
    analysis_commands,
    report_commands,
    planning_commands,
    bench_commands,
    preflight_commands,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pipeline", description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    for stage in STAGES:
        stage.register(verbs)
    return parser


@functools.cache
def verbs_with(default: str) -> frozenset[str]:
    """The verbs whose namespace ``default`` is true: ``ray_task`` (their work runs as a Ray task,
    ``pipeline.commands.add_ray_options`` with ``--gpus``), ``uses_torch`` (``pipeline.commands.add_verb``)."""
    [verbs] = [action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction)]
    return frozenset(name for name, parser in verbs.choices.items() if parser.get_default(default))


def runs_a_ray_task(shell_command: str) -> bool:
    """Whether a rule's shell command runs a verb whose work is a Ray task (``python -m pipeline <verb> ...``)."""
    return any(verb in verbs_with("ray_task") for verb in re.findall(r"\bpython -m pipeline ([\w-]+)", shell_command))


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    mark_phase("interpreter", process_start_time())
    args = build_parser().parse_args(argv)
    export_torch_switch(getattr(args, "uses_torch", False))
    try:
        args.run(args)
    except Exception as error:  # every failure ends in one sentence (pipeline.execution.errors), the log's last line
        sentence, with_traceback = failure_sentence(error, subject(args.verb, args))
        sys.stdout.flush()
        if with_traceback:
            traceback.print_exception(error, file=sys.stderr)
        print(sentence, file=sys.stderr, flush=True)
        return 1
    mark_phase("exit")
    return 0
