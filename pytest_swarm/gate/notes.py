"""What the gate has to say beside a verdict, as values; report/notes.py alone says them in words, so every report
says the same."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class NoBaseline:
    """No stored entry for this test on this hardware profile."""


@dataclass(frozen=True)
class RecordedWithoutCanary:
    """The marker asks for a canary, but the stored entry was recorded without one: absolute figures compared."""


@dataclass(frozen=True)
class NotInBaseline:
    """A gated figure the stored entry (or its canary record, `relative`) has no samples of."""

    figure: str
    relative: bool = False


@dataclass(frozen=True)
class NoValue:
    """A gated figure with no measured value to compare: on the item (`against` "baseline"), on both halves of any
    pair ("pair"), or on both the item and its canary ("canary")."""

    figure: str
    against: Literal["baseline", "pair", "canary"]


@dataclass(frozen=True)
class OneBoot:
    """The verdict rests on one boot on at least one side: rounds taken as samples, their spread floored."""

    cv_floor: float


@dataclass(frozen=True)
class Improved:
    """Figures significantly better than the stored baseline."""

    figures: tuple[str, ...]


@dataclass(frozen=True)
class PairsPlayed:
    """What the paired verdict rests on: `samples` boots and `pairs` pairs, and `how` they were played."""

    samples: int
    pairs: int
    how: Literal["rounds", "boots", "canary"]


@dataclass(frozen=True)
class Drift:
    """How far the runner drifted since the baseline was recorded, as the canary measured it: a ratio a figure."""

    ratios: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class Disturbed:
    """Pairs left out and played again: a neighbour came or went between a pair's two halves."""

    pairs: int
    cores: float
    """The change in other processes' CPU (or steal time) beyond which a pair is disturbed."""


@dataclass(frozen=True)
class Undecided:
    """The search for a verdict spent its budget before it decided: the run's own account of which budget."""

    why: str


@dataclass(frozen=True)
class NeverMeasured:
    """The A/B reference never played: the item stopped in the candidate's first boot, or its capacity search."""

    in_search: bool = False


@dataclass(frozen=True)
class CapacityUnbounded:
    """A capacity search's condition held at no level (`held_at_none`), or at the range's top (the capacity is at
    least `level`)."""

    side: str
    level: float
    held_at_none: bool


@dataclass(frozen=True)
class CapacityUndecided:
    """Levels a capacity search left undecided: counted as not shown to hold."""

    side: str
    levels: tuple[float, ...]
    why: str | None


@dataclass(frozen=True)
class CapacityEnded:
    """Why a capacity search stopped before it converged."""

    side: str
    why: str


@dataclass(frozen=True)
class NoReferenceCapacity:
    """The reference held the condition at no level measured: no capacity to compare with."""


@dataclass(frozen=True)
class NotEvaluated:
    """A limit on a sweep-relative figure left without a value (its C=1 item did not run before it): never a FAIL."""

    figure: str
    limit: str
    why: str


@dataclass(frozen=True)
class BusyHost:
    """Other processes (and the hypervisor's steal) kept cores busy during a failing item's rounds."""

    other_cores: float
    steal_cores: float


@dataclass(frozen=True)
class NotRestarted:
    """The item measured servers someone else runs (`Server.endpoint`, by label): none was started, stopped or
    restarted, so a boot of theirs is a new connection to the same process."""

    servers: tuple[str, ...]


Note = (
    NoBaseline
    | RecordedWithoutCanary
    | NotInBaseline
    | NoValue
    | OneBoot
    | Improved
    | PairsPlayed
    | Drift
    | Disturbed
    | Undecided
    | NeverMeasured
    | CapacityUnbounded
    | CapacityUndecided
    | CapacityEnded
    | NoReferenceCapacity
    | NotEvaluated
    | BusyHost
    | NotRestarted
)
"""Every note the gate can give."""
