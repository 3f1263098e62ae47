"""A confidence sequence on log values: valid however often it is looked at, for a search with no planned end.

The capacity search reads a level after every round with no budget known, so it uses Lai's mixture for a Gaussian
mean of unknown variance, valid at every look by Ville's inequality; running intersections keep a decision once
reached. The A/B search, whose budget bounds its looks, uses the narrower planned t-tests (gate/looks.py)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

MIXTURE_G = 1.0
"""Prior variance of the standardized effect in Lai's mixture: the unit-information choice."""


def _threshold_r(n: int, alpha: float, g: float) -> float:
    """The value of u^2 / s at which the mixture reaches 1 / alpha."""
    q = math.exp((2.0 / n) * (math.log(alpha) - 0.5 * math.log1p(n * g)))
    return (1.0 - q) * (1.0 + n * g) / g


def radius(n: int, spread: float, alpha: float, g: float = MIXTURE_G) -> float:
    """Half-width of the confidence sequence after `n` values; infinite while too few values to bound an unknown
    spread."""
    if n < 2:
        return math.inf
    r = _threshold_r(n, alpha, g)
    if r >= n:
        return math.inf
    return math.sqrt(r * spread / (n * (n - r)))


def _prefixes(values: Sequence[float]) -> Iterator[tuple[int, float, float]]:
    """n, the sum and the sum of squares of every prefix of two values or more: what each look of the sequence reads."""
    total = squares = 0.0
    for n, v in enumerate(values, start=1):
        total += v
        squares += v * v
        if n >= 2:
            yield n, total, squares


def running_interval(values: Sequence[float], alpha: float, g: float = MIXTURE_G) -> tuple[float, float]:
    """The running intersection of the intervals over every prefix of `values`. An empty one is returned as it is."""
    lower, upper = -math.inf, math.inf
    for n, total, squares in _prefixes(values):
        mean = total / n
        spread = max(squares - n * mean * mean, 0.0)
        r = radius(n, spread, alpha, g)
        lower, upper = max(lower, mean - r), min(upper, mean + r)
    return lower, upper
