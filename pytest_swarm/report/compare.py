"""`python -m pytest_swarm compare A.json B.json`: two saved runs side by side, each item's figures with their ratio.

Where both runs kept an item's rounds, each gated figure also gets the gate's own test: a one-sided Welch test of the
logs (boots as samples where a run had several, else its rounds with the CV floor), Holm-corrected over the item's
figures. The two runs were not paired in time, so a neighbour or a runner that changed between them is in the ratio:
the verdict says it is unpaired. Two runs of the results history (`--store`) are compared by their figures alone: the
history keeps no rounds.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import CompareError, HistoryError
from ..figures.registry import direction_of, gateable
from ..gate.statistics import Claim, Comparison, Verdict, compare_all, log_samples
from ..settings import GateSettings

Item = Mapping[str, Any]
StoredRun = Callable[[str, str], tuple[str, dict[str, Item]]]
"""A run of the results history by its store and run id (or a prefix): its full id and its items by node id."""


@dataclass(frozen=True)
class FigureRow:
    """One figure of an item in both runs: its values, B over A, and the gate's comparison where both kept rounds."""

    figure: str
    a: float
    b: float
    comparison: Comparison | None

    @property
    def ratio(self) -> float:
        return self.b / self.a


@dataclass(frozen=True)
class ItemRows:
    """One item of both runs, its figures side by side."""

    nodeid: str
    rows: tuple[FigureRow, ...]

    @property
    def flagged(self) -> bool:
        """A gated figure that is significantly worse in B."""
        return any(r.comparison is not None and r.comparison.verdict is Verdict.FAIL for r in self.rows)


def load_run(path: Path) -> dict[str, Item]:
    """A saved run's items by node id; CompareError naming the file where it is not one."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CompareError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise CompareError(f"{path}: not JSON ({exc})") from None
    tests = document.get("tests") if isinstance(document, dict) else None
    if not isinstance(tests, list) or not all(isinstance(t, dict) and "nodeid" in t for t in tests):
        raise CompareError(f"{path}: not a pytest-swarm JSON report (no list of tests with a nodeid)")
    return {str(t["nodeid"]): t for t in tests}


def _scalars(item: Item) -> dict[str, float]:
    """An item's figures that are one positive number (a distribution's p50, p95 and p99 under dotted names)."""
    out: dict[str, float] = {}
    for name, value in (item.get("figures") or {}).items():
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)) and math.isfinite(value) and value > 0:
            out[name] = float(value)
        elif isinstance(value, dict):
            for stat in ("p50", "p95", "p99"):
                number = value.get(stat)
                if isinstance(number, (int, float)) and not isinstance(number, bool) and number > 0:
                    out[f"{name}.{stat}"] = float(number)
    return out


def _per_boot(item: Item, figure: str) -> list[list[float]]:
    """A gated figure's positive per-round values, grouped by boot, from the rounds the JSON kept."""
    groups: dict[int, list[float]] = {}
    for round_ in (item.get("figures") or {}).get("rounds") or []:
        value = (round_.get("figures") or {}).get(figure)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            groups.setdefault(int(round_.get("boot", 0)), []).append(float(value))
    return list(groups.values())


def compare_items(a: Item, b: Item, gate: GateSettings, tolerance: float) -> tuple[FigureRow, ...]:
    """Every figure both items have, B against A; the gated ones tested where both kept rounds."""
    ours, theirs = _scalars(a), _scalars(b)
    claims = []
    for figure in gateable():
        before, after = log_samples(_per_boot(a, figure)), log_samples(_per_boot(b, figure))
        if before.n and after.n:
            claims.append(Claim(figure, direction_of(figure), after, before, tolerance))
    tested = {c.figure: c for c in compare_all(claims, gate.alpha, gate.cv_floor)} if claims else {}
    names = [n for n in ours if n in theirs]
    return tuple(FigureRow(n, ours[n], theirs[n], tested.get(n)) for n in names)


def compare_runs(a: Mapping[str, Item], b: Mapping[str, Item], gate: GateSettings, tolerance: float) -> list[ItemRows]:
    return [ItemRows(nodeid, compare_items(a[nodeid], b[nodeid], gate, tolerance)) for nodeid in a if nodeid in b]


TESTED = (
    "for a gated figure, `better` is the same ratio the better way up (above 1: B is better) with the gate's interval "
    "and verdict, unpaired (the runs were not interleaved)"
)
UNTESTED = "the history keeps a run's figures, not its rounds: ratios only, no test and no verdict"


def lines(
    items: Sequence[ItemRows], a: Mapping[str, Item], b: Mapping[str, Item], names: tuple[str, str], how: str = TESTED
) -> list[str]:
    """The comparison as the terminal shows it: an item a block, its gated figures first."""
    out = [f"A = {names[0]}, B = {names[1]}; ratio = B / A; {how}"]
    for item in items:
        out.append(f"{item.nodeid}{'  <- worse in B' if item.flagged else ''}")
        for row in sorted(item.rows, key=lambda r: r.comparison is None):
            said = f"{row.figure:28} {row.a:12.4g} {row.b:12.4g}  x{row.ratio:.3f}"
            if row.comparison is not None:  # the gate's ratio is the better way up: above 1 is better
                c = row.comparison
                said += f"  better x{c.ratio:.3f} [{c.lower:.3f}, {c.upper:.3f}] {c.verdict.value.upper()}"
            out.append("  " + said)
    only_a, only_b = [n for n in a if n not in b], [n for n in b if n not in a]
    out += [f"only in A: {n}" for n in only_a] + [f"only in B: {n}" for n in only_b]
    return out


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", help="the earlier run's JSON (--swarm-json), or with --store its run id (or a prefix)")
    parser.add_argument("b", help="the later run's, the same way")
    parser.add_argument(
        "--store",
        help="read A and B from this results history (SQLite path or postgresql:// URL; `history runs` lists the ids)",
    )
    parser.add_argument("--tolerance", type=_share, default=0.05, help="the share a figure may worsen (default 0.05)")
    parser.add_argument("--alpha", type=_share, default=GateSettings().alpha, help="the gate's alpha (default 0.01)")


def run(args: argparse.Namespace, stored: StoredRun) -> int:
    """Exit 1 where a gated figure is significantly worse in B, 0 otherwise, 2 where a file or run id is not a saved
    run."""
    try:
        if args.store:
            (name_a, a), (name_b, b) = stored(args.store, args.a), stored(args.store, args.b)
            names = (f"run {name_a[:12]}", f"run {name_b[:12]}")
        else:
            a, b = load_run(Path(args.a)), load_run(Path(args.b))
            names = (args.a, args.b)
    except (CompareError, HistoryError) as exc:
        print(f"python -m pytest_swarm compare: {exc}", file=sys.stderr)
        return 2
    gate = GateSettings(alpha=args.alpha)
    items = compare_runs(a, b, gate, args.tolerance)
    print("\n".join(lines(items, a, b, names, UNTESTED if args.store else TESTED)))
    return 1 if any(item.flagged for item in items) else 0
