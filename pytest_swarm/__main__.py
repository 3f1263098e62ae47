"""`python -m pytest_swarm COMMAND`: the plugin's commands outside a pytest run (today: `history`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .stores import history_command


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_swarm", description="pytest-swarm commands")
    commands = parser.add_subparsers(dest="tool", required=True, metavar="{history}")
    history_command.add_arguments(
        commands.add_parser("history", help="the results history: stored runs, a figure's series, change points")
    )
    args = parser.parse_args(argv)
    return history_command.run(args)


if __name__ == "__main__":
    sys.exit(main())
