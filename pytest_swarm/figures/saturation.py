"""Where a rate sweep saturates: the server stopped keeping up with the offered rate, and requests began to queue.

A pure function of the sweep's points, so hypothesis can check it. Saturation is
judged between neighbouring rates on two signs together, as the throughput and
latency curves of a load sweep show it: the rate served rose by less than half of
the rate offered in addition, and TTFT p95 is more than twice the best any lower
rate showed (the best, not the first: one disturbed item must not hide the climb).
Either alone misleads: served rate flattens at the end of a short round too, and
TTFT climbs with prompt length as well as with queueing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

GAIN = 0.5
"""Of the extra rate offered, the least share served for the server to count as keeping up."""
CLIMB = 2.0
"""TTFT p95 past this multiple of the lowest rate's: requests are waiting, not just prefilling."""


@dataclass(frozen=True)
class RatePoint:
    """One item of a rate sweep: the rate asked (its name), offered (really sent), served (successful requests a second), TTFT p95."""

    asked: float
    offered: float
    served: float
    ttft_p95: float | None


def saturation(points: Sequence[RatePoint]) -> tuple[RatePoint, RatePoint] | None:
    """(the last point that kept up, the first that did not), or None when every step kept up (or there is one point)."""
    ordered = sorted(points, key=lambda p: p.asked)
    floor: float | None = None
    for before, after in zip(ordered, ordered[1:]):
        if before.ttft_p95 is not None:
            floor = before.ttft_p95 if floor is None else min(floor, before.ttft_p95)
        kept_up = after.served - before.served >= GAIN * (after.offered - before.offered)
        queued = floor is not None and after.ttft_p95 is not None and after.ttft_p95 > CLIMB * floor
        if not kept_up and queued:
            return before, after
    return None
