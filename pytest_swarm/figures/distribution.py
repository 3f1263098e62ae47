"""Percentiles of one figure over requests or gaps, in plain Python: a round's figures are a few dozen small
distributions, where numpy's per-call cost outweighs the work."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Distribution:
    """Percentiles of one figure over requests (or gaps between tokens)."""

    n: int
    min: float | None
    p50: float | None
    p95: float | None
    p99: float | None
    max: float | None
    mean: float | None

    @property
    def median(self) -> float | None:
        return self.p50

    @classmethod
    def of(cls, values: Sequence[float]) -> Distribution:
        """Linear-interpolated percentiles, equal to numpy.percentile's default; all None when empty."""
        if not values:
            return cls(0, None, None, None, None, None, None)
        ordered = sorted(float(v) for v in values)
        p50, p95, p99 = (_linear(ordered, q) for q in (0.50, 0.95, 0.99))
        return cls(len(ordered), ordered[0], p50, p95, p99, ordered[-1], math.fsum(ordered) / len(ordered))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["median"] = self.p50
        return data


def _linear(ordered: Sequence[float], q: float) -> float:
    """Hyndman and Fan's type 7, interpolated from the nearer end as numpy's `_lerp` does: the two agree to the bit."""
    h = (len(ordered) - 1) * q
    lo = math.floor(h)
    a, b = ordered[lo], ordered[min(lo + 1, len(ordered) - 1)]
    t = h - lo
    return b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t
