"""What a run's reports are written from: one value, so every writer (terminal, JSON, Markdown, HTML) takes the same
bundle and a new writer needs no new plumbing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..gate.trends import Trend
from .item import ItemResult
from .sweeps import SweepFigures


@dataclass(frozen=True)
class RunReport:
    """The run as its reports show it: the hardware, every judged item, each sweep's figures, whether it completed,
    and the history's trends."""

    hardware: str
    fingerprint: Mapping[str, Any]
    items: Sequence[ItemResult]
    sweeps: Sequence[SweepFigures]
    complete: bool = True
    trends: Sequence[Trend] = ()
