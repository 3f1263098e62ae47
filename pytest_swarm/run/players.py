"""How rounds are played once servers are up: the seam that lets tests pass fake players and run in milliseconds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..core.records import RoundRecord
from ..load.rounds import PairBlock, PairSide, Rounds, play_rounds, run_pairs
from ..telemetry.memory import MemoryFigures


class Players(Protocol):
    """The players of an item's rounds: one side's boots, and both sides' pairs."""

    def rounds(self, asked: Rounds) -> tuple[list[RoundRecord], MemoryFigures | None]:
        """A boot's warm-up and rounds (load/rounds.py's `play_rounds`), appended to `asked.sink` as they end."""
        ...

    def pairs(self, sides: Sequence[PairSide], block: PairBlock) -> int:
        """One boot of both sides' pairs (load/rounds.py's `run_pairs`); the pairs played that count."""
        ...


class RealPlayers:
    """The players of a real run: the event loop against the servers."""

    def rounds(self, asked: Rounds) -> tuple[list[RoundRecord], MemoryFigures | None]:
        return play_rounds(asked)

    def pairs(self, sides: Sequence[PairSide], block: PairBlock) -> int:
        return run_pairs(sides, block)


REAL_PLAYERS: Players = RealPlayers()
