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


def quantile_floor(values: Sequence[float], q: float, confidence: float) -> float | None:
    """A one-sided lower confidence bound of the q-quantile, free of any assumed shape: the highest order statistic
    x_(r) with P(Binomial(n, q) >= r) >= confidence, as scipy.stats.quantile_test's interval takes it. None where
    even the smallest value is no such bound."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return None
    log_q, log_rest = math.log(q), math.log1p(-q)
    log_pmf = n * log_q  # P(X = n); walk down, adding each P(X = k) to the upper tail P(X >= k)
    log_tail = log_pmf
    for k in range(n, 0, -1):
        if log_tail >= math.log(confidence):
            return ordered[k - 1]
        log_pmf += math.log(k / (n - k + 1)) + log_rest - log_q  # P(X = k - 1) from P(X = k)
        log_tail = _log_add(log_tail, log_pmf)
    return None


def _log_add(a: float, b: float) -> float:
    """log(e^a + e^b) without leaving the log scale: the tails here start far below a float's smallest."""
    high, low = max(a, b), min(a, b)
    return high + math.log1p(math.exp(low - high))
