"""The A/B decision: a one-sided t-test at every sample from the 5th to the 40th, at one level that keeps alpha.

A t-test read after every sample at alpha would fail an unchanged server too often, and a confidence sequence pays
for its infinite horizon with a wider interval. The search has a budget, so its looks are planned (Pocock): one
nominal level from `LOOKS_TABLE` so that any look rejecting a true claim has chance alpha. Its p-value is valid
wherever the search stops, so Holm takes it. How the table was made: docs/gate.md."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean

import numpy as np
from scipy.special import stdtr, stdtrit

FIRST_LOOK = 5
"""The first sample a claim is tested at: earlier looks decide too rarely to pay for the level they take."""
LAST_LOOK = 40
"""The last look: the default budget. More looks would each get less of alpha (benchmarks/gating.py --summary)."""

LOOKS_TABLE: tuple[tuple[float, float], ...] = (
    (1e-06, 2.079e-05),
    (1.778e-06, 3.476e-05),
    (3.162e-06, 5.649e-05),
    (5.623e-06, 9.164e-05),
    (1e-05, 0.0001514),
    (1.778e-05, 0.0002565),
    (3.162e-05, 0.0004241),
    (5.623e-05, 0.0007076),
    (0.0001, 0.001188),
    (0.0001778, 0.001986),
    (0.0003162, 0.003331),
    (0.0005623, 0.005532),
    (0.001, 0.009112),
    (0.001778, 0.01498),
    (0.003162, 0.02432),
    (0.005623, 0.03921),
    (0.01, 0.06249),
    (0.01778, 0.09846),
    (0.03162, 0.1527),
    (0.05623, 0.2326),
    (0.1, 0.3458),
    (0.1778, 0.4984),
    (0.3162, 0.6879),
)
"""(nominal level, chance under the null that some look's p-value is at or below it): simulated, erring high
(docs/gate.md)."""

_LOOKS = LAST_LOOK - FIRST_LOOK + 1
_LOG_NOMINAL = np.log([nominal for nominal, _ in LOOKS_TABLE])
_LOG_OVERALL = np.log([overall for _, overall in LOOKS_TABLE])


def overall_p(nominal: float) -> float:
    """The chance under the null that the smallest look's p-value is at or below `nominal`: an upper bound."""
    if nominal <= 0.0:
        return 0.0
    if nominal > LOOKS_TABLE[-1][0]:
        return 1.0
    table = math.exp(float(np.interp(math.log(nominal), _LOG_NOMINAL, _LOG_OVERALL)))
    return min(table, _LOOKS * nominal, 1.0)


def nominal_level(alpha: float) -> float:
    """The level each look is tested at so that all together reject a true claim with chance at most `alpha`."""
    if alpha <= 0.0:
        return 0.0
    bonferroni = alpha / _LOOKS
    if alpha <= LOOKS_TABLE[0][1]:
        return bonferroni
    if alpha > LOOKS_TABLE[-1][1]:
        return LOOKS_TABLE[-1][0]
    table = math.exp(float(np.interp(math.log(alpha), _LOG_OVERALL, _LOG_NOMINAL)))
    return max(table, bonferroni)


@dataclass(frozen=True)
class Look:
    """One look at a claim's samples: the first `n` of them, their mean and sd."""

    n: int
    mean: float
    sd: float


def looks(values: Sequence[float]) -> list[Look]:
    """The looks `values` have reached so far, each O(1) from running sums about the first value."""
    out = []
    total = squares = 0.0
    for n, v in enumerate(values[:LAST_LOOK], start=1):
        d = v - values[0]
        total += d
        squares += d * d
        if n >= FIRST_LOOK:
            shift = total / n
            out.append(Look(n, values[0] + shift, math.sqrt(max(squares - n * shift * shift, 0.0) / (n - 1))))
    return out


def look_p(look: Look, margin: float, below: bool) -> float:
    """The one-sided t-test's p-value at one look (below=True: the FAIL test). A look without spread is certain."""
    p = float(stdtr(look.n - 1, _t(look, margin)))
    return p if below else 1.0 - p


def _t(look: Look, margin: float) -> float:
    gap = look.mean - margin
    if look.sd > 0.0:
        return gap / (look.sd / math.sqrt(look.n))
    return math.copysign(math.inf, gap) if gap else 0.0


def sequential_p(values: Sequence[float], margin: float, below: bool) -> float:
    """The rule's p-value after `values` (1 before the first look); valid whenever the search stops, for Holm."""
    return overall_p(min((look_p(look, margin, below) for look in looks(values)), default=1.0))


def radius(look: Look, nominal: float) -> float:
    """Half-width of a look's one-sided t bound at a nominal level."""
    return float(stdtrit(look.n - 1, 1.0 - nominal)) * look.sd / math.sqrt(look.n)


def running_interval(values: Sequence[float], alpha: float) -> tuple[float, float]:
    """The intersection of every look's one-sided t bounds: (lower, upper). An empty one (lower > upper) is returned
    as it is; the caller's first decision stands."""
    nominal = nominal_level(alpha)
    lower, upper = -math.inf, math.inf
    for look in looks(values):
        r = radius(look, nominal)
        lower, upper = max(lower, look.mean - r), min(upper, look.mean + r)
    return lower, upper


def samples_to_decide(gap: float, sd: float, alpha: float) -> int | None:
    """Fewest samples at whose look a bound at this spread would likely clear a margin `gap` away; None if no look
    would."""
    if gap <= 0.0:
        return None
    nominal = nominal_level(alpha)
    return next(
        (n for n in range(FIRST_LOOK, LAST_LOOK + 1) if radius(Look(n, 0.0, sd), nominal) <= gap),
        None,
    )


@dataclass(frozen=True)
class Running:
    """A claim's samples so far, at one level: n, mean, sd and the running interval."""

    n: int
    mean: float
    sd: float
    lower: float
    upper: float


def summary(values: Sequence[float], alpha: float) -> Running:
    """n, mean, sd and the running interval of a claim's samples, at one level."""
    n = len(values)
    mean = fmean(values) if values else math.nan
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n >= 2 else math.nan
    lower, upper = running_interval(values, alpha)
    return Running(n, mean, sd, lower, upper)
