"""The regression decision: pure statistics on log-scale samples, no I/O.

Throughput noise is multiplicative, so figures compare as log ratios. The
independent sample is a server boot (rounds inside one boot are correlated); with
fewer than two boots on a side, its rounds stand in, their spread floored at a CV
that represents the between-boot variance the rounds cannot show.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from statistics import fmean, stdev

from scipy import stats

from ..figures.names import HIGHER


class Verdict(str, Enum):
    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"
    NO_BASELINE = "no baseline"


@dataclass(frozen=True)
class LogSample:
    """Log-scale samples of one figure on one side, and how they were drawn."""

    values: tuple[float, ...]
    per_boot: bool

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return fmean(self.values)

    def sd(self, cv_floor: float) -> float:
        """Sample sd of the logs; floored at log(1 + cv_floor) when the samples are rounds of one boot."""
        sd = stdev(self.values) if self.n >= 2 else 0.0
        return sd if self.per_boot else max(sd, math.log1p(cv_floor))


def log_samples(per_boot_rounds: Sequence[Sequence[float]]) -> LogSample:
    """Samples of a figure from its values grouped by boot: one mean log per boot, or the rounds of a lone boot."""
    boots = [[math.log(v) for v in rounds] for rounds in per_boot_rounds if rounds]
    if len(boots) >= 2:
        return LogSample(tuple(fmean(b) for b in boots), per_boot=True)
    return LogSample(tuple(boots[0]) if boots else (), per_boot=False)


@dataclass(frozen=True)
class Comparison:
    """One figure against its baseline: the ratio (> 1 is better), its bounds, and the verdict."""

    figure: str
    direction: str
    baseline: float
    measured: float
    ratio: float
    lower: float
    upper: float
    alpha: float
    tolerance: float
    p_value: float
    verdict: Verdict
    one_boot: bool

    @property
    def improved(self) -> bool:
        """Significantly better than the baseline by more than the tolerance: time to re-baseline."""
        return self.lower > 1.0 + self.tolerance


def _welch(current: LogSample, baseline: LogSample, cv_floor: float) -> tuple[float, float]:
    """Standard error of the difference of means and Welch-Satterthwaite degrees of freedom."""
    vc = current.sd(cv_floor) ** 2 / current.n
    vb = baseline.sd(cv_floor) ** 2 / baseline.n
    se = math.sqrt(vc + vb)
    terms = [v**2 / (n - 1) for v, n in ((vc, current.n), (vb, baseline.n)) if n > 1]
    df = (vc + vb) ** 2 / sum(terms) if terms and sum(terms) > 0 else 1.0
    return se, max(df, 1.0)


def _exp(x: float) -> float:
    """exp that saturates: a bound with few degrees of freedom at a tiny alpha can pass 709."""
    return math.exp(x) if x < 709.0 else math.inf


def compare(
    figure: str,
    direction: str,
    current: LogSample,
    baseline: LogSample,
    tolerance: float,
    alpha: float,
    cv_floor: float,
) -> Comparison:
    """One-sided Welch test of "worse than 1 - tolerance" on the log ratio (better-is-up).

    FAIL needs the upper confidence bound of the ratio below 1 - tolerance (p < alpha);
    PASS needs only the point estimate within tolerance; anything else is inconclusive.
    """
    if current.n == 0 or baseline.n == 0:
        raise ValueError(f"{figure}: no samples on one side")
    sign = 1.0 if direction == HIGHER else -1.0
    d = sign * (current.mean - baseline.mean)
    se, df = _welch(current, baseline, cv_floor)
    margin = math.log1p(-tolerance)
    if se == 0:
        p_value = 0.0 if d < margin else 1.0
        lower = upper = d
    else:
        p_value = float(stats.t.cdf((d - margin) / se, df))
        quantile = float(stats.t.ppf(1.0 - alpha, df))
        lower, upper = d - quantile * se, d + quantile * se
    ratio = _exp(d)
    if p_value < alpha:
        verdict = Verdict.FAIL
    elif ratio >= 1.0 - tolerance:
        verdict = Verdict.PASS
    else:
        verdict = Verdict.INCONCLUSIVE
    return Comparison(
        figure=figure,
        direction=direction,
        baseline=_exp(baseline.mean),
        measured=_exp(current.mean),
        ratio=ratio,
        lower=_exp(lower),
        upper=_exp(upper),
        alpha=alpha,
        tolerance=tolerance,
        p_value=p_value,
        verdict=verdict,
        one_boot=not (current.per_boot and baseline.per_boot),
    )


def holm(p_values: Sequence[float], alpha: float) -> list[float]:
    """The level Holm's step-down procedure tests each p-value at.

    Rejected p-values get their own step's level; from the first step that fails on,
    every remaining p-value gets that step's level, which none of them can beat.
    """
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    granted = [0.0] * len(p_values)
    m = len(p_values)
    for rank, i in enumerate(order):
        level = alpha / (m - rank)
        if p_values[i] >= level:
            for j in order[rank:]:
                granted[j] = alpha / (m - rank)
            break
        granted[i] = level
    return granted


def compare_all(
    samples: Mapping[str, tuple[str, LogSample, LogSample, float]],
    alpha: float,
    cv_floor: float,
) -> list[Comparison]:
    """Compare every gated figure of an item, Holm-correcting alpha across them.

    `samples` maps figure -> (direction, current, baseline, tolerance).
    """
    first = [compare(f, d, c, b, t, alpha, cv_floor) for f, (d, c, b, t) in samples.items()]
    levels = holm([c.p_value for c in first], alpha)
    return [compare(f, d, c, b, t, level, cv_floor) for (f, (d, c, b, t)), level in zip(samples.items(), levels)]


def power(n: int, sd_log: float, tolerance: float, alpha: float, drop: float) -> float:
    """Chance that `n` boots a side FAIL a true drop of `drop` (equal spread, Welch ~ pooled t)."""
    df = 2 * n - 2
    se = sd_log * math.sqrt(2.0 / n)
    if se == 0:
        return 1.0 if drop > tolerance else 0.0
    nc = (math.log1p(-drop) - math.log1p(-tolerance)) / se
    return float(stats.nct.cdf(stats.t.ppf(alpha, df), df, nc))


def boots_needed(sd_log: float, tolerance: float, alpha: float, target: float = 0.9, limit: int = 64) -> int | None:
    """Fewest boots a side that FAIL a drop of twice the tolerance with `target` power, or None past `limit`.

    A drop of exactly the tolerance fails only at rate alpha by design (the bound
    must fall below 1 - tolerance), so the target is a regression clearly past it.
    """
    for n in range(2, limit + 1):
        if power(n, sd_log, tolerance, alpha, min(2 * tolerance, 0.99)) >= target:
            return n
    return None
