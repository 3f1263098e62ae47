"""The regression decision: pure statistics on log-scale samples, one sample a boot (docs/gate.md)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from statistics import fmean, stdev

import numpy as np
from scipy import stats

from ..core.figure_names import HIGHER, LOWER
from . import looks


class Verdict(StrEnum):
    """What the gate concluded; INCONCLUSIVE passes unless --swarm-strict, NO_BASELINE says there was nothing to
    compare with."""

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


BOOTS_LIMIT = 100
"""Past this many boots a side, boots_to_decide gives up: the ratio sits on the threshold."""


@dataclass(frozen=True)
class Comparison:
    """One figure against its baseline or A/B reference: the ratio (> 1 is better), its bounds, the verdict. `lower`
    is at `pass_alpha`, `upper` at `alpha` (Holm-corrected)."""

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
    threshold: float
    pass_alpha: float
    boots_to_decide: int | None = None
    expected: str | None = None
    stored: bool = False
    """Compared with a stored baseline, whose samples are fixed: `boots_to_decide` counts this run's boots only."""
    samples: int | None = None
    """A/B items: the paired samples (boots of both sides) the decision rests on (t-tests at planned looks,
    gate/looks.py); None for a Welch test against a stored baseline."""
    samples_to_decide: int | None = None
    """An INCONCLUSIVE paired claim: the samples at whose look, at the measured spread, a bound would most likely clear
    the threshold (None: no look the search plans would)."""

    @property
    def to_decide(self) -> str | None:
        """What would most likely decide this INCONCLUSIVE claim, as the reports say it; None when nothing is
        estimated."""
        if self.samples_to_decide is not None:
            return f"~{self.samples_to_decide} samples (boots of both sides)"
        return f"~{self.boots_to_decide} boots a side" if self.boots_to_decide is not None else None

    @property
    def improved(self) -> bool:
        """Significantly better than the baseline by more than the tolerance: time to re-baseline (never for an
        expectation)."""
        return self.expected is None and self.lower > 1.0 + self.tolerance

    @property
    def raw_ratio(self) -> float:
        """The ratio measured / baseline of the figure itself, whichever way is better: what an expectation is
        written in."""
        return self.ratio if self.direction == HIGHER else 1.0 / self.ratio

    @property
    def raw_bounds(self) -> tuple[float, float]:
        """The bounds on measured / baseline; the PASS test's is the lower where higher is better, the upper where lower
        is."""
        if self.direction == HIGHER:
            return self.lower, self.upper
        return _inverse(self.upper), _inverse(self.lower)


def _inverse(x: float) -> float:
    return 1.0 / x if x > 0 else math.inf


def welch(sd_a: float, n_a: int, sd_b: float, n_b: int) -> tuple[float, float]:
    """Standard error of the difference of two independent samples' means, and its Welch-Satterthwaite degrees of
    freedom (at least 1), from each side's standard deviation and size. A side of one sample (its spread the cv
    floor's, not measured) counts as one degree of freedom: left out, its variance would pass for known exactly."""
    va, vb = sd_a**2 / n_a, sd_b**2 / n_b
    terms = [v**2 / max(n - 1, 1) for v, n in ((va, n_a), (vb, n_b))]
    df = (va + vb) ** 2 / sum(terms) if terms and sum(terms) > 0 else 1.0
    return math.sqrt(va + vb), max(df, 1.0)


def _welch(current: LogSample, baseline: LogSample, cv_floor: float) -> tuple[float, float]:
    return welch(current.sd(cv_floor), current.n, baseline.sd(cv_floor), baseline.n)


def _exp(x: float) -> float:
    """`math.exp` that saturates: a bound with few degrees of freedom at a tiny alpha can pass 709."""
    return math.exp(x) if x < 709.0 else math.inf


def expectation(op: str, bound: float) -> tuple[str, float]:
    """An expected ratio (`>= 1.3`, `<= 0.8`) as a claim: its better-is-up direction and threshold. Strict and
    non-strict forms test alike."""
    if op in (">=", ">"):
        return HIGHER, bound
    if op in ("<=", "<"):
        return LOWER, 1.0 / bound
    raise ValueError(f"an expected ratio needs one of >= > <= <, got {op!r}")


def boots_to_decide(
    d: float,
    margin: float,
    sd_current: float,
    sd_baseline: float,
    alpha: float,
    limit: int = BOOTS_LIMIT,
    baseline_n: int | None = None,
) -> int | None:
    """Fewest boots a side at which a log ratio `d` would likely be decided against `margin`; None past `limit`."""
    gap = abs(d - margin)
    n = np.arange(2, limit + 1)
    vc = sd_current**2 / n
    vb = sd_baseline**2 / (n if baseline_n is None else baseline_n)
    if sd_current == 0 and sd_baseline == 0:
        return 2 if gap > 0 else None
    nb = n if baseline_n is None else max(baseline_n, 2)
    df = np.maximum((vc + vb) ** 2 / (vc**2 / (n - 1) + vb**2 / (nb - 1)), 1.0)
    decided = np.flatnonzero(
        stats.t.ppf(1.0 - alpha, df) * np.sqrt(vc + vb) <= gap
    )  # one vectorised call: this runs per inconclusive claim
    return int(n[decided[0]]) if decided.size else None


def _fail_test(
    direction: str, current: LogSample, baseline: LogSample, threshold: float, cv_floor: float
) -> tuple[float, float, float, float, float]:
    """The better-is-up log ratio, the log threshold, Welch's se and df, and the FAIL test's p-value."""
    d = (1.0 if direction == HIGHER else -1.0) * (current.mean - baseline.mean)
    se, df = _welch(current, baseline, cv_floor)
    margin = math.log(threshold)
    if se == 0:
        return d, margin, se, df, 0.0 if d < margin else 1.0
    return d, margin, se, df, float(stats.t.cdf((d - margin) / se, df))


@dataclass(frozen=True)
class Claim:
    """One comparison an item asks for: a figure's samples on both sides and the threshold they are tested against."""

    figure: str
    direction: str
    current: LogSample
    baseline: LogSample
    tolerance: float
    threshold: float | None = None
    expected: str | None = None
    stored: bool = False


def compare(claim: Claim, alpha: float, cv_floor: float, pass_alpha: float | None = None) -> Comparison:
    """One-sided Welch tests of "ratio >= threshold": FAIL when the bound at `alpha` lies below, PASS when the bound
    at `pass_alpha` lies at or above, else INCONCLUSIVE."""
    figure, direction, current, baseline, tolerance = (
        claim.figure,
        claim.direction,
        claim.current,
        claim.baseline,
        claim.tolerance,
    )
    if current.n == 0 or baseline.n == 0:
        raise ValueError(f"{figure}: no samples on one side")
    pass_alpha = alpha if pass_alpha is None else pass_alpha
    threshold = 1.0 - tolerance if claim.threshold is None else claim.threshold
    d, margin, se, df, p_value = _fail_test(direction, current, baseline, threshold, cv_floor)
    if se == 0:
        lower = upper = d
    else:
        lower = d - float(stats.t.ppf(1.0 - pass_alpha, df)) * se
        upper = d + float(stats.t.ppf(1.0 - alpha, df)) * se
    needed = None
    if p_value < alpha:
        verdict = Verdict.FAIL
    elif lower >= margin:
        verdict = Verdict.PASS
    else:
        verdict = Verdict.INCONCLUSIVE
        side_alpha = pass_alpha if d >= margin else alpha
        needed = boots_to_decide(
            d,
            margin,
            current.sd(cv_floor),
            baseline.sd(cv_floor),
            side_alpha,
            baseline_n=baseline.n if claim.stored else None,
        )
    ratio = _exp(d)
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
        threshold=threshold,
        pass_alpha=pass_alpha,
        boots_to_decide=needed,
        expected=claim.expected,
        stored=claim.stored,
    )


def holm(p_values: Sequence[float], alpha: float) -> list[float]:
    """The level Holm's step-down procedure tests each p-value at."""
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


Interval = Callable[[float], tuple[float, float]]
"""An interval as a function of the level each of its bounds is taken at: narrower as the level grows."""

_LEAST_LEVEL = 1e-15


def _first_level_excluding_zero(bounds: Interval) -> float:
    """The smallest level at which the interval leaves 0 out (a p-value, found by bisection on its log); 1 where it
    never does."""

    def excludes(level: float) -> bool:
        low, high = bounds(level)
        return low > 0.0 or high < 0.0

    if not excludes(0.5):
        return 1.0
    if excludes(_LEAST_LEVEL):
        return _LEAST_LEVEL
    low, high = math.log(_LEAST_LEVEL), math.log(0.5)
    while high - low > 1e-6:
        middle = (low + high) / 2
        low, high = (low, middle) if excludes(math.exp(middle)) else (middle, high)
    return math.exp(high)


def holm_intervals(family: Sequence[Interval], alpha: float) -> list[tuple[float, float]]:
    """Each interval of a family at the level Holm's step-down tests it at (`alpha` the family's, a bound's): the one
    that leaves 0 out at the smallest level first, at alpha/m, the next at alpha/(m-1), and from the first that holds
    0 on, all at that step's level. Read as "named where 0 is left out", the family's error stays within alpha, and
    everything Bonferroni's alpha/m names is named."""
    levels = holm([_first_level_excluding_zero(bounds) for bounds in family], alpha)
    return [bounds(level) for bounds, level in zip(family, levels, strict=True)]


def compare_all(claims: Sequence[Claim], alpha: float, cv_floor: float) -> list[Comparison]:
    """Compare every claim of an item: FAIL Holm-corrected, PASS each at `alpha` (intersection-union, so
    uncorrected)."""
    thresholds = [1.0 - c.tolerance if c.threshold is None else c.threshold for c in claims]
    p_values = [
        _fail_test(c.direction, c.current, c.baseline, t, cv_floor)[4] for c, t in zip(claims, thresholds, strict=True)
    ]
    levels = holm(p_values, alpha)
    return [compare(claim, level, cv_floor, pass_alpha=alpha) for claim, level in zip(claims, levels, strict=True)]


def power(n: int, sd_log: float, tolerance: float, alpha: float, drop: float) -> float:
    """Chance that `n` boots a side FAIL a true drop of `drop` (equal spread, Welch ~ pooled t)."""
    df = 2 * n - 2
    se = sd_log * math.sqrt(2.0 / n)
    if se == 0:
        return 1.0 if drop > tolerance else 0.0
    nc = (math.log1p(-drop) - math.log1p(-tolerance)) / se
    return float(stats.nct.cdf(stats.t.ppf(alpha, df), df, nc))


def boots_needed(sd_log: float, tolerance: float, alpha: float, target: float = 0.9, limit: int = 64) -> int | None:
    """Fewest boots a side that FAIL a drop of twice the tolerance with `target` power, or None past `limit`."""
    for n in range(2, limit + 1):
        if power(n, sd_log, tolerance, alpha, min(2 * tolerance, 0.99)) >= target:
            return n
    return None


@dataclass(frozen=True)
class PairedClaim:
    """One A/B comparison: each paired sample's log ratio in time order; `measured` and `baseline` are for the report
    only."""

    figure: str
    direction: str
    diffs: tuple[float, ...]
    measured: float
    baseline: float
    tolerance: float
    threshold: float | None = None
    expected: str | None = None


def compare_paired_all(claims: Sequence[PairedClaim], alpha: float) -> list[Comparison]:
    """Every paired claim decided at its planned looks: FAIL Holm-corrected, PASS each at `alpha`; valid wherever the
    search stops."""
    thresholds = [1.0 - c.tolerance if c.threshold is None else c.threshold for c in claims]
    ups = [[d if c.direction == HIGHER else -d for d in c.diffs] for c in claims]
    margins = [math.log(t) for t in thresholds]
    fail_p = [looks.sequential_p(up, margin, below=True) for up, margin in zip(ups, margins, strict=True)]
    levels = holm(fail_p, alpha)
    out = []
    for claim, up, margin, threshold, p_fail, level in zip(
        claims, ups, margins, thresholds, fail_p, levels, strict=True
    ):
        at_pass = looks.summary(up, alpha)
        lower = at_pass.lower
        upper = looks.running_interval(up, level)[1]
        p_pass = looks.sequential_p(up, margin, below=False)
        needed = None
        if p_fail < level:
            verdict = Verdict.FAIL
        elif p_pass < alpha:
            verdict = Verdict.PASS
        else:
            verdict = Verdict.INCONCLUSIVE
            if at_pass.n >= 2 and at_pass.sd > 0:
                needed = looks.samples_to_decide(
                    abs(at_pass.mean - margin), at_pass.sd, alpha if at_pass.mean >= margin else level
                )
        out.append(
            Comparison(
                figure=claim.figure,
                direction=claim.direction,
                baseline=claim.baseline,
                measured=claim.measured,
                ratio=_exp(at_pass.mean) if up else math.nan,
                lower=_exp(lower) if lower > -math.inf else 0.0,
                upper=_exp(upper),
                alpha=level,
                tolerance=claim.tolerance,
                p_value=p_fail,
                verdict=verdict,
                one_boot=False,
                threshold=threshold,
                pass_alpha=alpha,
                expected=claim.expected,
                samples=len(up),
                samples_to_decide=needed,
            )
        )
    return out
