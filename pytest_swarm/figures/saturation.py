"""Where a rate sweep saturates: served rate short and TTFT climbing together, since either alone misleads."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

BEHIND = 0.8
"""Served under this share of the rate sent: the server fell behind its arrivals."""
CLIMB = 2.0
"""TTFT p95 past this multiple of the best any lower rate showed: requests are waiting, not just prefilling."""


@dataclass(frozen=True)
class RatePoint:
    """One item of a rate sweep: the rate asked (its name), offered (really sent), served (successful requests a
    second), TTFT p95."""

    asked: float
    offered: float
    served: float
    ttft_p95: float | None


def saturation(points: Sequence[RatePoint]) -> tuple[RatePoint, RatePoint] | None:
    """(the last point that kept up, the first that did not), or None when every step kept up (or there is one
    point)."""
    ordered = sorted(points, key=lambda p: p.asked)
    floor: float | None = None
    for before, after in itertools.pairwise(ordered):
        if before.ttft_p95 is not None:
            floor = before.ttft_p95 if floor is None else min(floor, before.ttft_p95)
        behind = after.served < BEHIND * after.offered
        queued = floor is not None and after.ttft_p95 is not None and after.ttft_p95 > CLIMB * floor
        if behind and queued:
            return before, after
    return None


def behind(points: Sequence[RatePoint]) -> list[RatePoint]:
    """The points served under BEHIND of the rate sent: not keeping up, even without a TTFT climb."""
    return [p for p in sorted(points, key=lambda p: p.asked) if p.served < BEHIND * p.offered]
