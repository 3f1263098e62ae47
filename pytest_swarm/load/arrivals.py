"""Open-loop schedules, in seconds from the round's start: pure functions of the spec and seed, the same in every
generator."""

from __future__ import annotations

import math

import numpy as np

from ..specs import OpenLoop


def offsets(open_loop: OpenLoop) -> list[float]:
    """Send instants of one round, seconds from its start, ascending, first at 0."""
    kind = open_loop.arrival
    if kind == "ramp":
        return _ramp(open_loop)
    rate = open_loop.rate
    if rate is None:
        raise ValueError(f"arrival={kind!r} needs a rate")
    if kind == "constant":
        count = open_loop.requests if open_loop.requests is not None else _count_within(rate, open_loop.duration_s)
        return [i / rate for i in range(count)]
    rng = np.random.default_rng(open_loop.seed)
    shape = 1.0 if kind == "poisson" else float(open_loop.burst_shape or 1.0)
    times = [0.0]
    while True:
        if open_loop.requests is not None and len(times) >= open_loop.requests:
            return times
        gap = float(rng.gamma(shape, 1.0 / (rate * shape)))
        if open_loop.duration_s is not None and times[-1] + gap >= open_loop.duration_s:
            return times
        times.append(times[-1] + gap)


def _count_within(rate: float, duration_s: float | None) -> int:
    """Requests of a constant rate whose instants fall inside the duration: at 0, 1/rate, ... before its end."""
    if duration_s is None:
        raise ValueError("an open-loop schedule needs a duration or a request count")
    return max(1, math.ceil(duration_s * rate - 1e-9))


def _ramp(open_loop: OpenLoop) -> list[float]:
    """Instants where the integrated rate s*t + (e - s)*t^2 / (2*D) reaches 0, 1, 2, ..."""
    assert open_loop.ramp is not None
    start, end = open_loop.ramp
    if open_loop.duration_s is not None:
        duration = open_loop.duration_s
        count = max(1, math.ceil((start + end) / 2 * duration - 1e-9))
        if open_loop.requests is not None:
            count = min(count, open_loop.requests)
    else:
        assert open_loop.requests is not None
        count = open_loop.requests
        duration = 2 * count / (start + end)
    a, b = (end - start) / (2 * duration), start
    # The root of a*t^2 + b*t - n in its stable form: no cancellation when b is large or a tiny.
    return [2 * n / (b + math.sqrt(max(0.0, b * b + 4 * a * n))) if n else 0.0 for n in range(count)]
