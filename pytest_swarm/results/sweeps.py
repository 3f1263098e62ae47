"""The items of one marker as one Sweep: the levels asked for, those selected, what each measured.

Contention, speedup and parallelism read an item against its sweep's C=1 item, once its last selected item ends. A
limit read against a level left out is reported as not evaluated, not failed."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..figures.summary import ItemFigures
from ..specs import RATE, MarkerConfig, PlannedItem, ServerSpec
from .item import ItemResult


@dataclass(frozen=True)
class SweepFigures:
    """What a sweep showed across its levels: which ran, and the largest swarm that stayed interactive."""

    key: str
    levels: tuple[str, ...]
    """The marker's levels, by item id (c1, c2, w4, r0.5)."""
    measured: tuple[str, ...]
    """The levels that measured in this run, in the marker's order."""
    max_interactive_workers: int | None
    """Process mode: the most workers at which the swarm was interactive (None: never, or not process mode)."""
    process: bool
    complete: bool
    """Every selected level ended; False when the run was interrupted before it did."""

    @property
    def says_interactive(self) -> bool:
        """Whether max_interactive_workers means something: a process sweep that measured a level ("none": never)."""
        return self.process and bool(self.measured)

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(level for level in self.levels if level not in self.measured)


class Sweep:
    """One marker's selected items (its test function, less the level), measured in the marker's order."""

    def __init__(self, key: str, config: MarkerConfig, selected: Sequence[PlannedItem]) -> None:
        self.key = key
        self.config = config
        self.selected = {item.nodeid: item for item in selected}
        self.results: dict[str, ItemResult] = {}
        self._ended: set[str] = set()
        self._figures: SweepFigures | None = None

    def single_agent(self, server: ServerSpec) -> ItemFigures | None:
        """The C=1 result on this server (either side of an A/B item), if its item measured before."""
        for measured in self.results.values():
            for side in (measured, measured.reference_item()):
                if side is not None and side.server == server and side.result.agents == 1:
                    return side.result
        return None

    def without_single_agent(self, item: PlannedItem) -> str:
        """Why `item` has no C=1 result to be read against, naming the level."""
        c1 = self.config.level_id(1)
        if self.config.axis is RATE:
            return "an open-loop sweep has no C=1 item (its levels are request rates)"
        if self.config.axis.servers and self.config.concurrency != 1:
            return f"this sweep has no one-agent item (each of its workers has {self.config.concurrency} agents)"
        if item.level == 1:
            return "it is the C=1 item itself"
        if 1 not in self.config.levels:
            return f"this sweep has no {c1} level (levels {', '.join(map(self.config.level_id, self.config.levels))})"
        ones = [nodeid for nodeid, selected in self.selected.items() if selected.level == 1]
        if not ones:
            selected = ", ".join(self._ids(self.selected.values()))
            return f"{c1} of this sweep was deselected (-k, -m): this run selected {selected}"
        if not any(nodeid in self._ended for nodeid in ones):
            return f"{c1} of this sweep runs after it in this run's order"
        return f"{c1} of this sweep did not measure (skipped or failed)"

    def add(self, measured: ItemResult) -> None:
        """An item's result, or its concluded form in place of the one measured."""
        self.results[measured.nodeid] = measured

    def end(self, nodeid: str) -> None:
        """An item of the sweep ended (measured or not); after the last, the sweep's figures are computed, once."""
        self._ended.add(nodeid)
        if self._figures is None and self._ended >= self.selected.keys():
            self._figures = self._compute(complete=True)

    def figures(self) -> SweepFigures:
        """The figures computed when the last item ended; for a run interrupted before then, those of what measured."""
        return self._figures if self._figures is not None else self._compute(complete=False)

    def _compute(self, complete: bool) -> SweepFigures:
        """The figures of what measured whole: an item cut short by an interrupt is partial, and so is the sweep."""
        results = [self.results[nodeid] for nodeid in self.selected if nodeid in self.results]
        whole = [measured for measured in results if not measured.incomplete]
        process = self.config.axis.servers
        interactive = [measured.result.workers for measured in whole if process and measured.result.interactive]
        return SweepFigures(
            self.key,
            tuple(map(self.config.level_id, self.config.levels)),
            tuple(self._ids(measured.item for measured in whole)),
            max(interactive, default=None),
            process,
            complete and len(whole) == len(results),
        )

    def _ids(self, items: Iterable[PlannedItem]) -> list[str]:
        """Level ids in the marker's order, whatever order the run played them in (--ff, pytest-randomly)."""
        return [
            self.config.level_id(level)
            for level in sorted({item.level for item in items}, key=self.config.levels.index)
        ]


def sweeps_of(items: Iterable[PlannedItem]) -> dict[str, Sweep]:
    """The run's sweeps from its selected items, by sweep key, in collection order."""
    grouped: dict[str, list[PlannedItem]] = {}
    for item in items:
        grouped.setdefault(item.test_key, []).append(item)
    return {key: Sweep(key, members[0].config, members) for key, members in grouped.items()}
