"""Figures against the C=1 item of the same sweep: what concurrency cost each request and bought the item. None where
a figure is missing or zero."""

from __future__ import annotations

import math
from typing import NamedTuple


class Core(NamedTuple):
    """The core figures of one item the three ratios read."""

    effective_tps: float
    wall_s: float
    requests_per_round: float
    per_request_tps_median: float | None


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator == 0 or math.isnan(denominator):
        return None
    return numerator / denominator


def contention(item: Core, reference: Core | None) -> float | None:
    """1 - per_request_tps.median(C) / per_request_tps.median(C=1): how much slower each request decoded."""
    if reference is None:
        return None
    slowdown = _ratio(item.per_request_tps_median, reference.per_request_tps_median)
    return None if slowdown is None else 1.0 - slowdown


def speedup(item: Core, reference: Core | None) -> float | None:
    """The serial wall-clock for this round's requests (C=1 time per request x requests) over the concurrent one."""
    if reference is None:
        return None
    serial_per_request = _ratio(reference.wall_s, reference.requests_per_round)
    serial = serial_per_request * item.requests_per_round if serial_per_request is not None else None
    return _ratio(serial, item.wall_s)


def parallelism(item: Core, reference: Core | None) -> float | None:
    """effective_tps(C) / effective_tps(C=1): the slots that really opened."""
    return None if reference is None else _ratio(item.effective_tps, reference.effective_tps)
