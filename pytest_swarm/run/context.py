"""What every kind of item plays and judges with, and the protocol each kind keeps (run/kinds.py, bisect_kind.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..core.records import RoundRecord
from ..figures.summary import ItemFigures
from ..gate.verdict import GateOutcome, evaluate_ab
from ..results.item import ItemResult, Kind
from ..settings import GateSettings
from ..specs import PlannedItem
from .judge import Judge
from .round_pairs import Played
from .search import Search
from .sides import Side

SideLines = Callable[[Side, float | None], Callable[[RoundRecord], None]]
"""The progress line said after each round of a side (at a capacity level, where the float is given)."""
Lines = Callable[[PlannedItem, list[Side]], SideLines]
"""The session's progress lines for an item's sides."""


class ItemKind(Protocol):
    """One kind of item: its sides (the item's server first), how it plays them, what it leaves, how it is judged."""

    @property
    def item(self) -> PlannedItem: ...

    @property
    def sides(self) -> list[Side]: ...

    def play(self, lines: Lines, say: Callable[[str], None] | None) -> Played:
        """Boot and measure the sides until the kind's search ends; what died, on which side, how the search ended."""
        ...

    def payload(self, results: Sequence[ItemFigures], played: Played) -> Kind:
        """The kind's part of the item's result, from each side's figures (those that played a round)."""
        ...

    def judge(self, measured: ItemResult, without_c1: str) -> GateOutcome:
        """The item's verdict. `without_c1`: why a sweep-relative limit found no C=1 item to be read against."""
        ...


@dataclass
class Context:
    """What every kind plays and judges with: the search on the session's pools, the stored baselines, the gate's
    settings."""

    search: Search
    judge: Judge
    gate: GateSettings


def judge_against_reference(measured: ItemResult, gate: GateSettings, without_c1: str) -> GateOutcome:
    """An item judged against the reference measured beside it: an A/B item's, and a bisect's ends'."""
    other = measured.reference
    return evaluate_ab(
        measured.result,
        other.result if other else None,
        measured.config.criteria,
        gate,
        measured.undecided,
        without_c1,
    )
