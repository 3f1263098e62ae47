"""`python -m pytest_swarm COMMAND`: the plugin's commands outside a pytest run."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from .engines import models_command
from .report import compare
from .run import first_run
from .stores import history_command


class _Parser(argparse.ArgumentParser):
    """A usage error in one line, saying what and where (the usage is --help's)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (--help for the usage)\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _Parser(prog="python -m pytest_swarm", description="pytest-swarm commands")
    commands = parser.add_subparsers(
        dest="tool", required=True, metavar="{run,compare,history,models}", parser_class=_Parser
    )
    first_run.add_arguments(
        commands.add_parser("run", help="measure a running server's URL, or the embedded engine: the plugin's table")
    )
    compare.add_arguments(
        commands.add_parser("compare", help="two saved runs (--swarm-json) side by side: ratios, and the gate's test")
    )
    history_command.add_arguments(
        commands.add_parser("history", help="the results history: stored runs, a figure's series, change points")
    )
    models_command.add_arguments(
        commands.add_parser("models", help="make the models vLLM serves from this machine's files, ahead of a run")
    )
    args = parser.parse_args(argv)
    if args.tool == "run":
        return first_run.run(args)
    if args.tool == "models":
        return models_command.run(args)
    if args.tool == "compare":
        return compare.run(args, history_command.stored_run)
    return history_command.run(args)


if __name__ == "__main__":
    sys.exit(main())
