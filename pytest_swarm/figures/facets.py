"""An item's figures beyond its core, by facet: generic `Facet`s read by name, or typed values where a facet has a
shape of its own."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from ..telemetry.memory import MemoryFigures
from .agent import AgentFigures
from .distribution import Distribution
from .sessions import SessionFigures, TurnFigures
from .workers import NodeFigures, WorkerFigures

FigureValue = Distribution | float | None
"""A computed figure: a distribution over requests, or one number (None where the item has none)."""


def scalar_of(value: FigureValue, stat: str | None = None) -> float | None:
    """One number of a figure: a distribution's `stat` (p50, max, ...), or the figure itself where it is a number."""
    if isinstance(value, Distribution):
        if stat is None:
            raise TypeError(f"a distribution over requests has no single number without a stat: {value!r}")
        number: float | None = getattr(value, stat)
        return number
    return value


@dataclass(frozen=True)
class Facet(Mapping[str, FigureValue]):
    """One facet's computed figures by name, in the registry's order; a name reads as an attribute too."""

    by_name: Mapping[str, FigureValue] = field(default_factory=dict)

    def __getitem__(self, name: str) -> FigureValue:
        return self.by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.by_name)

    def __len__(self) -> int:
        return len(self.by_name)

    def __getattr__(self, name: str) -> FigureValue:
        by_name: Mapping[str, FigureValue] | None = self.__dict__.get("by_name")  # absent while a copy is unpickled
        if by_name is None or name not in by_name:
            raise AttributeError(f"no figure {name!r} in this facet (it has: {', '.join(by_name or ()) or 'none'})")
        return by_name[name]

    def distribution(self, name: str) -> Distribution:
        """A figure that is a distribution over requests (`facet.distribution("wait").p99`), typed as one."""
        value = self[name]
        if not isinstance(value, Distribution):
            raise TypeError(f"figure {name!r} is {value!r}, not a distribution over requests")
        return value

    def number(self, name: str) -> float | None:
        """A figure that is one number, or None where the item has none, typed as such."""
        return scalar_of(self[name])


class RequestPoint(NamedTuple):
    """One request as the HTML report's scatter draws it: percentiles hide the tail, points show it."""

    ttft: float | None
    decode_tps: float | None
    ok: bool
    worker: int = 0


@dataclass(frozen=True)
class Facets:
    """Every facet of one item; a facet that does not apply to it holds its figures as None (or empty)."""

    answers: Facet = field(default_factory=Facet)
    open_loop: Facet = field(default_factory=Facet)
    sweep: Facet = field(default_factory=Facet)
    server: Facet = field(default_factory=Facet)
    cost: Facet = field(default_factory=Facet)
    where: Facet = field(default_factory=Facet)
    """Where a request's time went (figures/components.py): each component's p50 and p95."""
    added: Mapping[str, float] = field(default_factory=dict)
    """Figures a conftest or another plugin added through the pytest_swarm_figures hook (hookspecs.py)."""
    agent: AgentFigures = field(default_factory=AgentFigures)
    """What the answers were made of: reasoning and answer tokens, tool calls, how requests finished."""
    per_turn: tuple[TurnFigures, ...] = ()
    sessions: SessionFigures | None = None
    per_worker: tuple[WorkerFigures, ...] = ()
    nodes: tuple[NodeFigures, ...] = ()
    """Per Ray node with --swarm-ray; empty on this machine."""
    memory: MemoryFigures | None = None
    energy_note: str | None = None
    """Why the cost facet's energy figure is None: no GPU, NVML absent, a GPU without the energy counter."""
    points: tuple[RequestPoint, ...] = field(default=(), repr=False)
    """Every request of the measured rounds, failed ones included: raw data for the HTML scatter, not a figure."""
