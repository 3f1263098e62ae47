"""`python -m pytest_swarm COMMAND`: the plugin's commands outside a pytest run."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .engines import models_command
from .stores import history_command


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_swarm", description="pytest-swarm commands")
    commands = parser.add_subparsers(dest="tool", required=True, metavar="{history,models}")
    history_command.add_arguments(
        commands.add_parser("history", help="the results history: stored runs, a figure's series, change points")
    )
    models_command.add_arguments(
        commands.add_parser("models", help="make the models vLLM serves from this machine's files, ahead of a run")
    )
    args = parser.parse_args(argv)
    if args.tool == "models":
        return models_command.run(args)
    return history_command.run(args)


if __name__ == "__main__":
    sys.exit(main())
