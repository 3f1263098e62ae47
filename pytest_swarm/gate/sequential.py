"""The A/B decision as a confidence sequence on paired log ratios: valid whenever the search stops.

An A/B item measures candidate and reference in pairs close in time, and each boot of
both sides gives one sample, its pairs' mean log ratio (gate/pairs.py). Samples are
added one at a time until the claim is decided, which a fixed-sample test cannot
survive: looking after every sample and stopping at the first significant look
inflates its false-alarm rate several times over.

So the bounds are a confidence sequence, Lai's (1976) mixture for a Gaussian mean of
unknown variance: the scale-invariant likelihood ratio of "mean = mu0" against a
N(0, g) prior on the standardized effect, a nonnegative martingale under mu0, which
by Ville's inequality exceeds 1 / alpha with probability at most alpha over the whole
infinite sequence of looks. The interval of every mu0 it has not rejected is
closed-form, and the running intersection of the intervals is as valid as each one,
so a decision once reached stays. The price of looking after every sample is a
wider interval than one fixed-n t interval (about 1.6 times at 20 samples):
benchmarks/gate_simulation.py measures what that costs in samples and power.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from statistics import fmean

MIXTURE_G = 1.0
"""Prior variance of the standardized effect in Lai's mixture: the unit-information choice. At 10 to 30 samples its
interval is within 3% of the narrowest any g from 0.25 to 8 gives (g = 2 is as narrow; smaller g cannot decide
before ten samples, larger g widens past 12), and the gate's gaps are one to two spreads wide there."""

SAMPLES_LIMIT = 1000
"""Past this many samples, samples_to_decide gives up: the ratio sits on the threshold."""


def _threshold_r(n: int, alpha: float, g: float) -> float:
    """The value of u^2 / s (sum squared over sum of squares about mu0) at which the mixture reaches 1 / alpha.

    The mixture is (1 + n g)^(-1/2) (1 - g r / (1 + n g))^(-n/2) with r = u^2 / s; solved for r.
    """
    q = math.exp((2.0 / n) * (math.log(alpha) - 0.5 * math.log1p(n * g)))
    return (1.0 - q) * (1.0 + n * g) / g


def radius(n: int, spread: float, alpha: float, g: float = MIXTURE_G) -> float:
    """Half-width of the confidence sequence after `n` pairs whose squared deviations about their mean sum to `spread`.

    Every mu0 with n^2 (mean - mu0)^2 / (spread + n (mean - mu0)^2) below the mixture's
    threshold r* stays in; when r* >= n no mu0 can be rejected yet (too few pairs for
    an unknown spread), and the radius is infinite.
    """
    if n < 2:
        return math.inf
    r = _threshold_r(n, alpha, g)
    if r >= n:
        return math.inf
    return math.sqrt(r * spread / (n * (n - r)))


def log_mixture(values: Sequence[float], mu0: float, g: float = MIXTURE_G) -> float:
    """Log of Lai's mixture likelihood ratio for "mean = mu0" after `values`: the evidence against mu0."""
    return _log_mixture(len(values), sum(values), sum(v * v for v in values), mu0, g)


def _log_mixture(n: int, total: float, squares: float, mu0: float, g: float) -> float:
    """log_mixture from the running sums, so that every prefix of a sequence costs O(1)."""
    if n == 0:
        return 0.0
    u = total - n * mu0
    s = squares - 2.0 * mu0 * total + n * mu0 * mu0
    if s <= 0.0:
        return 0.0
    shrunk = 1.0 - g * (u * u / s) / (1.0 + n * g)
    if shrunk <= 0.0:
        return math.inf
    return -0.5 * math.log1p(n * g) - 0.5 * n * math.log(shrunk)


@dataclass(frozen=True)
class Running:
    """The running state of one claim's confidence sequence after every pair so far."""

    n: int
    mean: float
    sd: float
    lower: float
    upper: float


def _prefixes(values: Sequence[float]) -> Iterator[tuple[int, float, float]]:
    """n, the sum and the sum of squares of every prefix of two values or more: what each look of the sequence reads."""
    total = squares = 0.0
    for n, v in enumerate(values, start=1):
        total += v
        squares += v * v
        if n >= 2:
            yield n, total, squares


def running_interval(values: Sequence[float], alpha: float, g: float = MIXTURE_G) -> tuple[float, float]:
    """The running intersection of the confidence sequence's intervals over every prefix of `values`: (lower, upper).

    An empty intersection (lower > upper) can only happen on a sequence the model does
    not describe; it is returned as it is, and the caller's first decision stands.
    """
    lower, upper = -math.inf, math.inf
    for n, total, squares in _prefixes(values):
        mean = total / n
        spread = max(squares - n * mean * mean, 0.0)
        r = radius(n, spread, alpha, g)
        lower, upper = max(lower, mean - r), min(upper, mean + r)
    return lower, upper


def anytime_p(values: Sequence[float], margin: float, below: bool, g: float = MIXTURE_G) -> float:
    """Anytime-valid p-value of "the mean is on the other side of `margin`", over every prefix of `values`.

    `below=True` asks for evidence that the mean lies below the margin (a regression
    past the tolerance: the FAIL test), False for evidence above it (the PASS test).
    The p-value is 1 over the largest mixture seen at a prefix whose mean lay on the
    asked side: by Ville's inequality it falls under a level with probability at
    most that level under the null, however the search was stopped, so Holm's
    procedure can take it like any p-value.
    """
    best = 0.0
    for n, total, squares in _prefixes(values):
        mean = total / n
        if (mean < margin) if below else (mean > margin):
            best = max(best, _log_mixture(n, total, squares, margin, g))
    return math.exp(-best) if best < 745.0 else 0.0


def samples_to_decide(
    gap: float, sd: float, alpha: float, g: float = MIXTURE_G, limit: int = SAMPLES_LIMIT
) -> int | None:
    """Fewest samples at which a confidence sequence at this spread would be narrower than `gap`: a likely decision.

    If the true mean sits `gap` from the margin and the samples spread as measured,
    the interval's radius falls under the gap at about this n; None past `limit`
    (the ratio sits on the threshold).
    """
    if gap <= 0 or radius(limit, (limit - 1) * sd * sd, alpha, g) > gap:
        return None
    low, high = 1, limit  # radius(n) falls as n grows: bisect for the first n where it is within the gap
    while high - low > 1:
        mid = (low + high) // 2
        if radius(mid, (mid - 1) * sd * sd, alpha, g) <= gap:
            high = mid
        else:
            low = mid
    return high


def summary(values: Sequence[float], alpha: float, g: float = MIXTURE_G) -> Running:
    """n, mean, sd and the running interval of a claim's samples, at one level."""
    n = len(values)
    mean = fmean(values) if values else math.nan
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n >= 2 else math.nan
    lower, upper = running_interval(values, alpha, g)
    return Running(n, mean, sd, lower, upper)
