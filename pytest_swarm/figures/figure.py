"""What one figure's registry entry says, the facets a figure can belong to, and what an item figure is computed
from. Free of numpy and scipy."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..core.records import RequestRecord, RoundRecord
from .relative import Core

if TYPE_CHECKING:
    from ..telemetry.memory import MemoryFigures

CORE = "core"
"""Fields of `ItemFigures`: what every item measures."""
ANSWERS = "answers"
"""What the answers themselves show: the first answer token after a thought, answers short of their length, token
counts the stream contradicts."""
AGENT = "agent"
"""Read from the typed `AgentFigures` (agent.py): tool calls."""
OPEN_LOOP = "open_loop"
"""Open-loop items: the rate really sent, how late sends left, latencies from the instant each request was due."""
SWEEP = "sweep"
"""Read against the C=1 item of the same sweep: None where that item did not run before this one in the session."""
SERVER = "server"
"""The server's own accounting (eval figures, cache counters), or checking what it did (streams decoding at once)."""
COST = "cost"
"""What a token costs, in money at the runner's price, in energy from the GPUs' counter."""
MEMORY = "memory"
"""Read from the typed `MemoryFigures` (telemetry/memory.py): the servers' peaks."""
WHERE = "where"
"""Where a request's time went, by the server's own clock (components.py): queue, load, prefill, decode, and the
client's share or what no clock accounts for."""
CAPACITY = "capacity"
"""The capacity search's answer (gate/capacity.py): limitable and gateable by name, not a figure of one summary."""

Samples = Callable[[RequestRecord], "float | Sequence[float] | None"]
"""One request's values of a distribution: one value, several (the gaps between its tokens), or none."""


@dataclass(frozen=True)
class Measured:
    """What an item-level figure (`Figure.of_item`) is computed from."""

    rounds: Sequence[RoundRecord]
    records: Sequence[RequestRecord]
    core: Core
    output_tokens: int
    reference: Core | None = None
    """The C=1 item of the same sweep, measured earlier in the session; None without one."""
    memory: MemoryFigures | None = None
    price_per_hour: float | None = None
    pinned_tokens: int | None = None
    """The answer length every request asked for, where the workload pins it."""


@dataclass(frozen=True)
class Column:
    """A column of the terminal table a figure fills: its title, the statistic shown (a distribution's) and format."""

    title: str
    fmt: str
    stat: str | None = None


@dataclass(frozen=True)
class Figure:
    """One figure: everything the summary, the marker, the gate and the reports need to know of it."""

    name: str
    facet: str
    unit: str
    direction: str
    """HIGHER or LOWER: which way is better (the gate's and the trends' sense of a regression)."""
    doc: str
    label: str = ""
    """What the reports call it (`send lateness`); the name when empty."""
    stats: tuple[str, ...] = ()
    """A distribution's statistics that are scalar figures (`ttft.p95`); empty for a single value."""
    shown: tuple[str, ...] = ()
    """The statistics its facet's report line shows; `stats` when empty."""
    gated: bool | tuple[str, ...] = False
    """Measured per round, so a baseline can gate it: True for a single value, or which of `stats`."""
    limitable: bool = True
    """A hard limit (`slo=`, the YAML's min/max) may apply to it."""
    stored: bool = True
    """Among the item's scalars (limits, JUnit, the results history); False: in its facet and the JSON report only."""
    per_request: Samples | None = None
    """A distribution over requests: each request's values."""
    every_request: bool = False
    """`per_request` over every request, failed ones included; over successful ones when False."""
    of_item: Callable[[Measured], float | None] | None = None
    """A single value computed from the item's requests, rounds and core figures."""
    column: Column | None = None

    @property
    def scalars(self) -> tuple[str, ...]:
        """Its scalar names: `name` for a single value, `name.stat` for each of a distribution's stats."""
        return tuple(f"{self.name}.{s}" for s in self.stats) if self.stats else (self.name,)

    @property
    def gated_scalars(self) -> tuple[str, ...]:
        if self.gated is True:
            return self.scalars
        return tuple(f"{self.name}.{s}" for s in self.gated or ())

    @property
    def title(self) -> str:
        return self.label or self.name.replace("_", " ")
