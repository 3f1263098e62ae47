"""What a baseline entry holds, as the gate reads it: per gated figure its samples (and ratios to a canary) and how
it was measured. Stored by stores/baselines.py."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .statistics import LogSample


@dataclass(frozen=True)
class FigureBaseline:
    """One figure's recorded samples and which way is better: what an item's figure is gated against."""

    direction: str
    samples: tuple[float, ...]
    per_boot: bool
    tolerance: float | None = None
    min: float | None = None
    max: float | None = None
    relative: tuple[float, ...] = ()
    """Per sample, the figure over the canary's measured beside it (gate/canary.py); empty when recorded without one."""

    def log_sample(self) -> LogSample:
        return LogSample(tuple(math.log(v) for v in self.samples), self.per_boot)


@dataclass(frozen=True)
class CanaryBaseline:
    """The canary an entry was recorded with: its server, and per gated figure its own value per sample (the drift's
    yardstick)."""

    server: dict[str, Any]
    figures: dict[str, tuple[float, ...]]


@dataclass(frozen=True)
class WhereBaseline:
    """Where the recorded rounds' time went, so a later change can be split against it: seconds a request per
    component, per sample."""

    source: str
    per_boot: bool
    end: dict[str, tuple[float, ...]]
    first_token: dict[str, tuple[float, ...]]
    state: dict[str, float] = field(default_factory=dict)
    level: float | None = None


@dataclass(frozen=True)
class TestBaseline:
    """One item's stored baseline: its figures, the server and provenance it was recorded with, and its canary."""

    figures: dict[str, FigureBaseline]
    server: dict[str, Any] = field(default_factory=dict)
    recorded: dict[str, Any] = field(default_factory=dict)
    boots: int = 1
    rounds: int = 1
    canary: CanaryBaseline | None = None
    where: WhereBaseline | None = None


@dataclass
class BaselineFile:
    """A hardware profile's baselines file: what each item recorded on that hardware, and where it came from."""

    hardware: str
    fingerprint: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    tests: dict[str, TestBaseline] = field(default_factory=dict)
    price_per_hour: float | None = None
    """What the hardware profile costs an hour, written by hand: the items' cost_per_mtok is read from it."""
