"""`python -m pytest_swarm history`: stored runs and a figure's series with its change points. Reads only; exit 0, 1
when nothing matched, 2 for usage."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._util.credentials import redact
from ..core.errors import HistoryError
from ..gate.trends import Trend
from ..settings import HISTORY_FILE
from .history import HistoryStore, is_postgres

DEFAULT_STORE = str(Path("baselines") / HISTORY_FILE)


def _positive(text: str) -> int:
    """--last N: a count of runs, so 0 or a negative number is a mistake, not 'all' or 'none'."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number of runs, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number of runs, got {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        default=DEFAULT_STORE,
        help=f"SQLite path or postgresql:// URL (default: {DEFAULT_STORE}; the pytest ini's swarm_history is not read)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="{runs,series}")
    runs = commands.add_parser("runs", help="list the stored runs, oldest first")
    runs.add_argument("--last", type=_positive, default=None, metavar="N", help="only the newest N runs")
    series = commands.add_parser("series", help="one figure's values per test id and hardware, change points flagged")
    series.add_argument("test_id", help="a node id, or a test function's id for all its parametrized items")
    series.add_argument("figure", help="a figure name, e.g. effective_tps or ttft.p95")
    series.add_argument("--hardware", default=None, help="only this hardware profile")
    series.add_argument(
        "--last", type=_positive, default=None, metavar="N", help="only the newest N runs of each series"
    )


def _runs(store: HistoryStore, last: int | None) -> list[str]:
    rows = [("started (UTC)", "run", "hardware", "commit", "items", "complete", "host")]
    rows += [
        (
            run.started_at[:19],
            run.run_id[:8],
            run.hardware,
            (run.git_commit or "-")[:10],
            str(run.items),
            "yes" if run.complete else "partial",
            run.host or "-",
        )
        for run in store.runs(last)
    ]
    widths = [max(len(row[k]) for row in rows) for k in range(len(rows[0]))]
    return (
        ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
        if len(rows) > 1
        else []
    )


def _series(store: HistoryStore, test_id: str, figure: str, hardware: str | None, last: int | None) -> list[str]:
    lines = []
    for (nodeid, hw), points in sorted(store.series(test_id, figure, hardware, last).items()):
        trend = Trend.of(nodeid, hw, figure, points)
        changes = {c.index: c for c in trend.changes}
        lines.append(
            f"{nodeid} on {hw}: {figure}, {len(points)} runs, "
            f"{len(changes)} change point{'' if len(changes) == 1 else 's'}"
        )
        for k, point in enumerate(points):
            flag = f"  <- change {changes[k].describe()}" if k in changes else ""
            lines.append(
                f"  {point.started_at[:19]}  {(point.git_commit or '-')[:10]:10}  {(point.engine_version or '-'):12}  "
                f"{point.value:>12.5g}  {point.verdict or '-':12}{flag}".rstrip()
            )
    return lines


def stored_run(location: str, run: str) -> tuple[str, dict[str, Mapping[str, Any]]]:
    """A stored run's items as `compare` reads a saved run's: a node id and its figures each; HistoryError where the
    store or the run cannot be read."""
    if not is_postgres(location) and not Path(location).is_file():
        raise HistoryError(f"no results store at {redact(location)}")
    run_id, figures = HistoryStore(location).run_figures(run)
    return run_id, {nodeid: {"nodeid": nodeid, "figures": values} for nodeid, values in figures.items()}


def run(args: argparse.Namespace) -> int:
    location = str(args.store)
    if not is_postgres(location) and not Path(location).is_file():
        print(
            f"pytest-swarm history: no results store at {redact(location)} (run the suite first, or pass --store)",
            file=sys.stderr,
        )
        return 1
    try:
        store = HistoryStore(location)
        if args.command == "runs":
            lines = _runs(store, args.last)
            empty = f"no runs stored in {store.name}"
        else:
            lines = _series(store, args.test_id, args.figure, args.hardware, args.last)
            empty = (
                f"no values of {args.figure} for {args.test_id}"
                + (f" on {args.hardware}" if args.hardware else "")
                + f" in {store.name}"
            )
    except HistoryError as exc:
        print(f"pytest-swarm history: {exc}", file=sys.stderr)
        return 1
    if not lines:
        print(f"pytest-swarm history: {empty}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0
