"""How rounds are played once an item's servers are up: the seam between the run's orchestration and the load.

The search, a capacity search and the stage decide what to boot, how many rounds and pairs to play and when to stop;
`Players` is what they call to play them. The real players drive the event loop against the servers
(load/rounds.py). The fast tests of run/ pass players that make RoundRecords of a speed they choose, with a fake pool
(engines/pool.py's `Servers`), as pytest-xdist tests its schedulers against `MockNode`: the stopping rules, the
canary's normalisation and a capacity search's path through its levels are then checked in milliseconds.
"""

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
