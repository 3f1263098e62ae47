"""How rounds are played once an item's servers are up: the seam between the run's orchestration and the load.

The search, a capacity search and the stage decide what to boot, how many rounds and pairs to play and when to stop;
`Players` is what they call to play them. The real players drive the event loop against the servers
(load/rounds.py). The fast tests of run/ pass players that make RoundRecords of a speed they choose, with a fake pool
(engines/pool.py's `Servers`), as pytest-xdist tests its schedulers against `MockNode`: the stopping rules, the
canary's normalisation and a capacity search's path through its levels are then checked in milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..core.records import RoundRecord
from ..load.rounds import PairBlock, PairSide, run_load, run_pairs
from ..telemetry.memory import MemoryFigures

PlayRounds = Callable[..., tuple[list[RoundRecord], MemoryFigures | None]]
"""load/rounds.py's `run_load`, or what stands in for it: a boot's warm-up and rounds, appended to `sink=`."""
PlayPairs = Callable[[Sequence[PairSide], PairBlock], int]
"""load/rounds.py's `run_pairs`, or what stands in for it: one boot of both sides' pairs; the pairs played."""


@dataclass(frozen=True)
class Players:
    """The players of an item's rounds: one side's boots, and both sides' pairs."""

    rounds: PlayRounds = run_load
    pairs: PlayPairs = run_pairs


REAL_PLAYERS = Players()
"""The players of a real run: the event loop against the servers."""
