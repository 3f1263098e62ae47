"""The regression decision (statistics.py), checked against its definitions.

The gate fails builds, so a decision that is not monotone in the measured value,
that treats "higher is better" and "lower is better" differently, or whose
p-value is not the Welch test it claims to be, would fail (or pass) the wrong
builds. Every property here is recomputed independently rather than trusted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats

from pytest_swarm.core.figure_names import HIGHER, LOWER
from pytest_swarm.gate.statistics import (
    BOOTS_LIMIT,
    Claim,
    Comparison,
    LogSample,
    Verdict,
    boots_to_decide,
    compare,
    compare_all,
    expectation,
    holm,
    holm_intervals,
    log_samples,
)

ORDER = {Verdict.FAIL: 0, Verdict.INCONCLUSIVE: 1, Verdict.PASS: 2}
"""Worse to better: a faster build may move a verdict only rightwards."""

# --- strategies -----------------------------------------------------------------

# Spreads and alphas are kept where the bounds stay finite: with df = 1 a tiny alpha or a
# thousandfold spread overflows exp() (see test_tiny_alpha_with_one_round_a_side_does_not_crash).
positive = st.floats(min_value=0.05, max_value=20.0, allow_nan=False, allow_infinity=False)
logs = st.floats(min_value=-3.0, max_value=3.0, allow_nan=False, allow_infinity=False)
tolerances = st.floats(min_value=0.01, max_value=0.5)
alphas = st.floats(min_value=0.005, max_value=0.2)
cv_floors = st.floats(min_value=0.0, max_value=0.3)


@st.composite
def raw_boots(draw: st.DrawFn) -> list[list[float]]:
    """Positive per-round values grouped by boot: one boot (rounds as samples) or several."""
    n_boots = draw(st.integers(1, 5))
    return [draw(st.lists(positive, min_size=1, max_size=4)) for _ in range(n_boots)]


@st.composite
def log_sample_values(draw: st.DrawFn) -> LogSample:
    """A LogSample as log_samples could produce it: per-boot means, or the rounds of one boot."""
    per_boot = draw(st.booleans())
    values = draw(st.lists(logs, min_size=2 if per_boot else 1, max_size=6))
    return LogSample(tuple(values), per_boot)


def _compare(
    direction: str,
    current: LogSample,
    baseline: LogSample,
    tolerance: float = 0.1,
    alpha: float = 0.01,
    cv: float = 0.03,
) -> Comparison:
    return compare(Claim("fig", direction, current, baseline, tolerance), alpha, cv)


def _boots(center: float, spread: Sequence[float]) -> LogSample:
    """Per-boot log samples of `center` times each multiplier: several boots, so per_boot."""
    return log_samples([[center * m] for m in spread])


TIGHT = (0.99, 1.0, 1.01, 1.0)
"""Four boots with about 1% spread."""

# --- log_samples ----------------------------------------------------------------


def test_log_samples_several_boots_give_one_mean_log_per_boot() -> None:
    """With >= 2 boots the boot is the independent sample: rounds are averaged on log scale per boot."""
    sample = log_samples([[1.0, math.e**2], [math.e, math.e], [10.0]])
    assert sample.per_boot is True
    assert sample.n == 3
    assert sample.values == pytest.approx((1.0, 1.0, math.log(10.0)))


def test_log_samples_one_boot_gives_its_rounds() -> None:
    """A lone boot's rounds stand in for boots, flagged so the sd gets floored."""
    sample = log_samples([[2.0, 4.0, 8.0]])
    assert sample.per_boot is False
    assert sample.values == pytest.approx((math.log(2.0), math.log(4.0), math.log(8.0)))


def test_log_samples_skips_empty_boots() -> None:
    """A boot whose every request failed has no value; it must not count as a boot."""
    sample = log_samples([[], [3.0, 3.0], []])
    assert sample.per_boot is False
    assert sample.values == pytest.approx((math.log(3.0), math.log(3.0)))
    assert log_samples([]).n == 0


@given(raw_boots())
def test_log_samples_shape(boots: list[list[float]]) -> None:
    """`n` is the boot count with >= 2 boots, else the round count; each value is a mean of logs."""
    sample = log_samples(boots)
    if len(boots) >= 2:
        assert sample.per_boot
        assert sample.values == pytest.approx(tuple(np.mean(np.log(b)) for b in boots))
    else:
        assert not sample.per_boot
        assert sample.values == pytest.approx(tuple(np.log(boots[0])))


@given(log_sample_values(), cv_floors)
def test_sd_floor_only_for_rounds_of_one_boot(sample: LogSample, cv: float) -> None:
    """Rounds of one boot cannot show between-boot variance: their sd is floored at log(1 + cv)."""
    raw = float(np.std(sample.values, ddof=1)) if sample.n >= 2 else 0.0
    if sample.per_boot:
        assert sample.sd(cv) == pytest.approx(raw, abs=1e-12)
    else:
        assert sample.sd(cv) >= math.log1p(cv)
        assert sample.sd(cv) == pytest.approx(max(raw, math.log1p(cv)), abs=1e-12)


# --- compare: properties --------------------------------------------------------


@settings(max_examples=150)
@given(raw_boots(), raw_boots(), st.floats(min_value=1.001, max_value=100.0), tolerances, alphas, cv_floors)
def test_monotone_in_the_measured_value(
    current: list[list[float]], baseline: list[list[float]], k: float, tolerance: float, alpha: float, cv: float
) -> None:
    """A build that is k times faster everywhere can never get a worse verdict or a lower ratio."""
    before = compare(Claim("effective_tps", HIGHER, log_samples(current), log_samples(baseline), tolerance), alpha, cv)
    faster = [[v * k for v in boot] for boot in current]
    after = compare(Claim("effective_tps", HIGHER, log_samples(faster), log_samples(baseline), tolerance), alpha, cv)
    assert ORDER[after.verdict] >= ORDER[before.verdict]
    assert after.ratio >= before.ratio
    assert after.ratio == pytest.approx(before.ratio * k, rel=1e-9)
    assert after.p_value >= before.p_value - 1e-12


@settings(max_examples=150)
@given(log_sample_values(), log_sample_values(), tolerances, alphas, cv_floors)
def test_symmetric_in_direction(
    current: LogSample, baseline: LogSample, tolerance: float, alpha: float, cv: float
) -> None:
    """Flipping "lower is better" on x to "higher is better" on -x gives the same verdict, ratio, bounds and p-value."""
    up = compare(Claim("f", HIGHER, current, baseline, tolerance), alpha, cv)
    negated_c = LogSample(tuple(-v for v in current.values), current.per_boot)
    negated_b = LogSample(tuple(-v for v in baseline.values), baseline.per_boot)
    down = compare(Claim("f", LOWER, negated_c, negated_b, tolerance), alpha, cv)
    assert down.verdict is up.verdict
    assert down.ratio == pytest.approx(up.ratio, rel=1e-12)
    assert down.lower == pytest.approx(up.lower, rel=1e-12)
    assert down.upper == pytest.approx(up.upper, rel=1e-12)
    assert down.p_value == pytest.approx(up.p_value, rel=1e-9, abs=1e-15)
    assert down.improved == up.improved
    assert down.one_boot == up.one_boot


@settings(max_examples=150)
@given(log_sample_values(), st.sampled_from([HIGHER, LOWER]), tolerances, alphas, cv_floors)
def test_identical_samples_never_fail_and_pass_once_the_bound_clears(
    sample: LogSample, direction: str, tolerance: float, alpha: float, cv: float
) -> None:
    """Measuring exactly the baseline again is never a regression; it is shown equivalent only when its lower bound clears 1 - tol."""
    result = compare(Claim("f", direction, sample, sample, tolerance), alpha, cv)
    assert result.verdict is not Verdict.FAIL
    assert (result.verdict is Verdict.PASS) == (result.lower >= 1 - tolerance)
    assert result.ratio == 1.0
    assert result.lower <= 1.0 <= result.upper
    assert not result.improved
    assert result.p_value >= 0.5


@settings(max_examples=150)
@given(
    log_sample_values(), log_sample_values(), st.sampled_from([HIGHER, LOWER]), tolerances, alphas, alphas, cv_floors
)
def test_verdict_is_consistent_with_its_numbers(
    current: LogSample,
    baseline: LogSample,
    direction: str,
    tolerance: float,
    alpha: float,
    pass_alpha: float,
    cv: float,
) -> None:
    """FAIL iff p < alpha, which is the upper bound below 1 - tolerance; PASS iff the lower bound (at pass_alpha) is at or above it.

    So a PASS is never given while the lower bound is below 1 - tolerance, whatever the point estimate.
    """
    result = compare(Claim("f", direction, current, baseline, tolerance), alpha, cv, pass_alpha=pass_alpha)
    assert result.lower <= result.ratio * (1 + 1e-12)
    assert result.ratio <= result.upper * (1 + 1e-12)
    assert 0.0 <= result.p_value <= 1.0
    assert result.threshold == 1 - tolerance
    assert (result.verdict is Verdict.FAIL) == (result.p_value < alpha)
    if result.verdict is Verdict.FAIL:
        assert result.upper <= (1 - tolerance) * (1 + 1e-9)
    elif result.lower >= 1 - tolerance:
        assert result.verdict is Verdict.PASS
    else:
        assert result.verdict is Verdict.INCONCLUSIVE
    if result.lower < 1 - tolerance:
        assert result.verdict is not Verdict.PASS
    assert (result.boots_to_decide is not None) <= (result.verdict is Verdict.INCONCLUSIVE)
    assert result.improved == (result.lower > 1 + tolerance)


@settings(max_examples=100)
@given(
    log_sample_values(),
    log_sample_values(),
    st.integers(2, 6),
    st.sampled_from([HIGHER, LOWER]),
    tolerances,
    alphas,
    cv_floors,
)
def test_more_samples_at_the_same_mean_and_spread_never_turn_a_pass_into_a_fail(
    current: LogSample, baseline: LogSample, k: int, direction: str, tolerance: float, alpha: float, cv: float
) -> None:
    """Each value repeated k times: same means, spread no larger, more samples. A PASS stays a PASS (never a FAIL), a FAIL a FAIL."""
    before = compare(Claim("f", direction, current, baseline, tolerance), alpha, cv)
    more_c = LogSample(current.values * k, current.per_boot)
    more_b = LogSample(baseline.values * k, baseline.per_boot)
    after = compare(Claim("f", direction, more_c, more_b, tolerance), alpha, cv)
    assert after.ratio == pytest.approx(before.ratio, rel=1e-9)
    if before.verdict is Verdict.PASS:
        assert after.verdict is Verdict.PASS
    if before.verdict is Verdict.FAIL:
        assert after.verdict is Verdict.FAIL


# --- compare: worked examples ---------------------------------------------------


def test_half_throughput_with_tight_boots_fails() -> None:
    """A 50% drop measured on 4 boots a side with ~1% spread is a regression beyond doubt."""
    result = _compare(HIGHER, _boots(50.0, TIGHT), _boots(100.0, TIGHT))
    assert result.verdict is Verdict.FAIL
    assert result.ratio == pytest.approx(0.5, rel=1e-9)
    assert result.p_value < result.alpha
    assert result.upper < 1 - result.tolerance
    assert result.lower < 0.5 < result.upper
    assert result.baseline == pytest.approx(100.0, rel=1e-3)
    assert result.measured == pytest.approx(50.0, rel=1e-3)
    assert not result.one_boot
    assert not result.improved


def test_half_latency_doubling_fails_for_lower_is_better() -> None:
    """For a latency, doubling is the regression: the ratio is baseline/measured."""
    result = _compare(LOWER, _boots(2.0, TIGHT), _boots(1.0, TIGHT))
    assert result.verdict is Verdict.FAIL
    assert result.ratio == pytest.approx(0.5, rel=1e-9)


def test_half_throughput_with_huge_spread_is_inconclusive() -> None:
    """The same 50% drop inside a thousandfold spread cannot be told from noise: neither PASS nor FAIL."""
    spread = (1.0, 10.0, 100.0, 1000.0)
    result = _compare(HIGHER, _boots(50.0, spread), _boots(100.0, spread))
    assert result.ratio == pytest.approx(0.5, rel=1e-9)
    assert result.p_value >= result.alpha
    assert result.verdict is Verdict.INCONCLUSIVE


def test_small_drop_within_tolerance_passes() -> None:
    """A significant 5% drop is still inside a 10% tolerance: the gate tests "worse than 1 - tolerance", not "different"."""
    result = _compare(HIGHER, _boots(95.0, TIGHT), _boots(100.0, TIGHT))
    assert result.verdict is Verdict.PASS
    assert result.upper < 1.0


def test_improvement_passes_and_is_flagged() -> None:
    """Twice as fast: PASS, and `improved` once the lower bound clears 1 + tolerance (time to re-baseline)."""
    result = _compare(HIGHER, _boots(200.0, TIGHT), _boots(100.0, TIGHT))
    assert result.verdict is Verdict.PASS
    assert result.lower > 1 + result.tolerance
    assert result.improved


def test_small_improvement_is_not_flagged() -> None:
    """5% better is within tolerance: no re-baselining nag."""
    result = _compare(HIGHER, _boots(105.0, TIGHT), _boots(100.0, TIGHT))
    assert result.verdict is Verdict.PASS
    assert not result.improved


def test_one_boot_uses_the_cv_floor_and_flags_it() -> None:
    """Identical rounds of one boot would give sd 0 (certainty); the floor keeps the CV >= cv_floor."""
    cv = 0.03
    current = log_samples([[95.0, 95.0, 95.0]])
    baseline = log_samples([[100.0, 100.0, 100.0]])
    result = compare(Claim("f", HIGHER, current, baseline, 0.01), 0.01, cv)
    assert result.one_boot
    floor = math.log1p(cv)
    se = math.sqrt(2 * floor**2 / 3)
    df = (2 * floor**2 / 3) ** 2 / (2 * (floor**2 / 3) ** 2 / 2)
    expected = stats.t.cdf((math.log(0.95) - math.log1p(-0.01)) / se, df)
    assert result.p_value == pytest.approx(expected, rel=1e-9)
    # Without the floor these would be a certain FAIL; with it a 5% drop on 3 rounds is not significant.
    assert result.verdict is Verdict.INCONCLUSIVE
    certain = compare(
        Claim("f", HIGHER, LogSample(current.values, True), LogSample(baseline.values, True), 0.01), 0.01, cv
    )
    assert certain.verdict is Verdict.FAIL
    assert not certain.one_boot


def test_one_boot_on_one_side_is_flagged() -> None:
    """one_boot is set when either side rests on the rounds of a single boot."""
    assert _compare(HIGHER, log_samples([[100.0, 101.0]]), _boots(100.0, TIGHT)).one_boot
    assert _compare(HIGHER, _boots(100.0, TIGHT), log_samples([[100.0, 101.0]])).one_boot


def test_no_samples_raises() -> None:
    """A figure with nothing measured cannot be compared; the error names the figure."""
    with pytest.raises(ValueError, match=r"ttft\.p95"):
        compare(Claim("ttft.p95", LOWER, LogSample((), False), _boots(1.0, TIGHT), 0.1), 0.01, 0.03)


@pytest.mark.parametrize("alpha", [1e-5, 1e-6])
def test_tiny_alpha_with_one_round_a_side_does_not_crash(alpha: float) -> None:
    """rounds=1, boots=1 and a strict --swarm-alpha are all allowed settings; the gate must still answer.

    One sample a side leaves one degree of freedom: at alpha 1e-5 the bound is far too
    wide to show equivalence, so the honest answer is INCONCLUSIVE (under the old
    point-estimate rule this was a PASS), with the boots that would decide it.
    """
    result = compare(Claim("effective_tps", HIGHER, log_samples([[100.0]]), log_samples([[100.0]]), 0.1), alpha, 0.03)
    assert result.verdict is Verdict.INCONCLUSIVE
    assert result.lower < 0.9 and result.ratio == 1.0
    assert result.boots_to_decide is not None and result.boots_to_decide >= 2


def _welch_p(
    current: Sequence[float], baseline: Sequence[float], sd_c: float, sd_b: float, d: float, tolerance: float
) -> float:
    """The one-sided Welch p-value, written out from the textbook formula."""
    nc, nb = len(current), len(baseline)
    vc, vb = sd_c**2 / nc, sd_b**2 / nb
    se = math.sqrt(vc + vb)
    df = (vc + vb) ** 2 / (vc**2 / (nc - 1) + vb**2 / (nb - 1))
    return float(stats.t.cdf((d - math.log(1 - tolerance)) / se, df))


@settings(max_examples=150)
@given(
    st.lists(logs, min_size=2, max_size=8),
    st.lists(logs, min_size=2, max_size=8),
    st.booleans(),
    st.sampled_from([HIGHER, LOWER]),
    tolerances,
    alphas,
    cv_floors,
)
def test_p_value_is_welch(
    current: list[float],
    baseline: list[float],
    per_boot: bool,
    direction: str,
    tolerance: float,
    alpha: float,
    cv: float,
) -> None:
    """`p = P(T_df <= (d - log(1 - tol)) / se)`, Welch-Satterthwaite df, sd floored only for one-boot samples."""

    def sd(values: list[float]) -> float:
        raw = float(np.std(values, ddof=1))
        return raw if per_boot else max(raw, math.log1p(cv))

    sd_c, sd_b = sd(current), sd(baseline)
    assume(sd_c > 1e-6 and sd_b > 1e-6)
    sign = 1.0 if direction == HIGHER else -1.0
    d = sign * (float(np.mean(current)) - float(np.mean(baseline)))
    result = compare(
        Claim("f", direction, LogSample(tuple(current), per_boot), LogSample(tuple(baseline), per_boot), tolerance),
        alpha,
        cv,
    )
    assert result.p_value == pytest.approx(_welch_p(current, baseline, sd_c, sd_b, d, tolerance), rel=1e-6, abs=1e-12)
    assert result.ratio == pytest.approx(math.exp(d), rel=1e-9)
    se = math.sqrt(sd_c**2 / len(current) + sd_b**2 / len(baseline))
    assert math.log(result.upper) - math.log(result.lower) == pytest.approx(
        2 * se * stats.t.ppf(1 - alpha, _df(sd_c, sd_b, current, baseline)), rel=1e-6
    )


def _df(sd_c: float, sd_b: float, current: Sequence[float], baseline: Sequence[float]) -> float:
    vc, vb = sd_c**2 / len(current), sd_b**2 / len(baseline)
    return (vc + vb) ** 2 / (vc**2 / (len(current) - 1) + vb**2 / (len(baseline) - 1))


# --- holm -----------------------------------------------------------------------

p_lists = st.lists(st.floats(min_value=0.0, max_value=1.0, allow_nan=False), min_size=1, max_size=12)
holm_alphas = st.floats(min_value=1e-6, max_value=0.5)


def _rejected(p_values: Sequence[float], levels: Sequence[float]) -> set[int]:
    return {i for i, (p, level) in enumerate(zip(p_values, levels, strict=True)) if p < level}


def test_holm_worked_example() -> None:
    """`m = 4`, `alpha = 0.05`: steps 0.0125, 0.0167, 0.025 (stops: 0.03 >= 0.025), so two rejections."""
    p = [0.04, 0.001, 0.03, 0.01]
    levels = holm(p, 0.05)
    assert levels[1] == pytest.approx(0.05 / 4)
    assert levels[3] == pytest.approx(0.05 / 3)
    assert _rejected(p, levels) == {1, 3}


def test_holm_empty() -> None:
    assert holm([], 0.05) == []


@settings(max_examples=200)
@given(p_lists, holm_alphas)
def test_holm_between_bonferroni_and_uncorrected(p_values: list[float], alpha: float) -> None:
    """Holm rejects at least what Bonferroni (alpha/m) rejects and never more than uncorrected alpha."""
    m = len(p_values)
    levels = holm(p_values, alpha)
    assert len(levels) == m
    smallest = min(range(m), key=lambda i: p_values[i])
    assert levels[smallest] == pytest.approx(alpha / m)
    holm_set = _rejected(p_values, levels)
    bonferroni = {i for i, p in enumerate(p_values) if p < alpha / m}
    uncorrected = {i for i, p in enumerate(p_values) if p < alpha}
    assert bonferroni <= holm_set <= uncorrected
    assert all(0 <= level <= alpha for level in levels)


@settings(max_examples=200)
@given(p_lists, holm_alphas)
def test_holm_is_step_down(p_values: list[float], alpha: float) -> None:
    """The rejected set is exactly the k smallest p-values, k the first rank whose p misses alpha/(m - rank)."""
    m = len(p_values)
    ordered = sorted(p_values)
    k = next((r for r, p in enumerate(ordered) if p >= alpha / (m - r)), m)
    rejected = _rejected(p_values, holm(p_values, alpha))
    assert len(rejected) == k
    assert sorted(p_values[i] for i in rejected) == ordered[:k]


def _t_interval(diffs: Sequence[float]) -> Callable[[float], tuple[float, float]]:
    mean, se = float(np.mean(diffs)), float(np.std(diffs, ddof=1)) / math.sqrt(len(diffs))
    return lambda level: (
        mean - float(stats.t.ppf(1 - level, len(diffs) - 1)) * se,
        mean + float(stats.t.ppf(1 - level, len(diffs) - 1)) * se,
    )


def _one_bound_p(diffs: Sequence[float]) -> float:
    """The level at which a t interval's nearer bound reaches 0: the one-sided p of the mean's side."""
    t = float(np.mean(diffs)) / (float(np.std(diffs, ddof=1)) / math.sqrt(len(diffs)))
    return float(stats.t.sf(abs(t), len(diffs) - 1))


diff_families = st.lists(
    st.lists(st.floats(min_value=-1.0, max_value=1.0, allow_nan=False), min_size=3, max_size=8).filter(
        lambda d: float(np.std(d, ddof=1)) > 1e-6
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=150)
@given(diff_families, st.floats(min_value=1e-4, max_value=0.05))
def test_holm_intervals_leave_0_out_exactly_where_holm_rejects_and_at_least_where_bonferroni_does(
    family: list[list[float]], alpha: float
) -> None:
    """Intervals given as functions of their level: the ones that leave 0 out are Holm's rejections of the exact
    p-values, a superset of Bonferroni's; each interval is the function's at a level between alpha/m and alpha."""
    p_values = [_one_bound_p(d) for d in family]
    levels = holm(p_values, alpha)
    assume(all(abs(math.log(p) - math.log(level)) > 1e-4 for p, level in zip(p_values, levels, strict=True)))
    bounds = [_t_interval(d) for d in family]
    found = holm_intervals(bounds, alpha)
    named = {i for i, (low, high) in enumerate(found) if low > 0 or high < 0}
    assert named == _rejected(p_values, levels)
    assert named >= {i for i, p in enumerate(p_values) if p < alpha / len(family)}
    for (low, high), interval in zip(found, bounds, strict=True):
        widest, narrowest = interval(alpha / len(family)), interval(alpha)
        assert widest[0] - 1e-9 <= low <= narrowest[0] + 1e-9 and narrowest[1] - 1e-9 <= high <= widest[1] + 1e-9


def test_holm_intervals_of_an_interval_that_never_closes_hold_0() -> None:
    """Fewer than two samples: unbounded at every level, never named, and the others step down past it."""
    family = [lambda level: (-math.inf, math.inf), _t_interval([1.0, 1.1, 0.9, 1.05])]
    (open_, closed) = holm_intervals(family, 0.01)
    assert open_ == (-math.inf, math.inf) and closed[0] > 0


WIDE = (0.9, 1.0, 1.1, 1.0)
"""Four boots with about 8% spread: drops of 20-30% land near alpha = 0.05."""


def _claims(samples: dict[str, tuple[str, LogSample, LogSample, float]]) -> list[Claim]:
    return [Claim(name, d, c, b, t) for name, (d, c, b, t) in samples.items()]


def test_compare_all_applies_holm() -> None:
    """Two borderline drops (p 0.033 and 0.044) each FAIL alone at alpha 0.05, but not after correcting for two figures."""
    base = _boots(100.0, WIDE)
    samples = {"a": (HIGHER, _boots(79.0, WIDE), base, 0.1), "b": (HIGHER, _boots(80.0, WIDE), base, 0.1)}
    singles = {name: compare(Claim(name, d, c, b, t), 0.05, 0.03) for name, (d, c, b, t) in samples.items()}
    assert all(s.verdict is Verdict.FAIL for s in singles.values())
    assert 0.025 < singles["a"].p_value < singles["b"].p_value < 0.05
    results = {c.figure: c for c in compare_all(_claims(samples), 0.05, 0.03)}
    assert [results[n].verdict for n in "ab"] == [Verdict.INCONCLUSIVE, Verdict.INCONCLUSIVE]
    assert results["a"].alpha == pytest.approx(0.025)
    assert results["a"].p_value == pytest.approx(singles["a"].p_value)


def test_compare_all_steps_down() -> None:
    """Once the strong drop is rejected at alpha/2, the borderline one is tested at the full alpha and FAILs too (Bonferroni would not)."""
    base = _boots(100.0, WIDE)
    samples = {"strong": (HIGHER, _boots(70.0, WIDE), base, 0.1), "weak": (HIGHER, _boots(80.0, WIDE), base, 0.1)}
    results = {c.figure: c for c in compare_all(_claims(samples), 0.05, 0.03)}
    assert results["strong"].alpha == pytest.approx(0.025)
    assert results["weak"].alpha == pytest.approx(0.05)
    assert results["weak"].p_value > 0.025
    assert results["strong"].verdict is Verdict.FAIL
    assert results["weak"].verdict is Verdict.FAIL


@settings(max_examples=200)
@given(st.lists(st.tuples(log_sample_values(), log_sample_values()), min_size=1, max_size=5), alphas, cv_floors)
def test_compare_all_never_more_liberal_than_alpha(
    pairs: list[tuple[LogSample, LogSample]], alpha: float, cv: float
) -> None:
    """Correcting across figures may only turn FAILs into non-FAILs, never the reverse."""
    samples = {f"f{i}": (HIGHER, c, b, 0.1) for i, (c, b) in enumerate(pairs)}
    corrected = compare_all(_claims(samples), alpha, cv)
    for comparison, (c, b) in zip(corrected, pairs, strict=True):
        single = compare(Claim(comparison.figure, HIGHER, c, b, 0.1), alpha, cv)
        if comparison.verdict is Verdict.FAIL:
            assert single.verdict is Verdict.FAIL
        assert comparison.alpha <= alpha
        assert comparison.pass_alpha == alpha
        assert (comparison.verdict is Verdict.PASS) == (single.verdict is Verdict.PASS)


def test_compare_all_tests_equivalence_at_the_full_alpha() -> None:
    """Holm shares alpha among the FAIL tests; the PASS side is an intersection-union test, each claim at the full alpha.

    Three figures at 8% spread, 3% better than the baseline: each PASSes alone at alpha
    0.05, and still does among three, although at Holm's alpha/3 its lower bound would not clear.
    """
    base = _boots(100.0, WIDE)
    claims = [Claim(name, HIGHER, _boots(103.0, WIDE), base, 0.1) for name in "abc"]
    results = compare_all(claims, 0.05, 0.03)
    assert all(c.verdict is Verdict.PASS and c.pass_alpha == 0.05 and c.alpha < 0.05 for c in results)
    at_holm_level = compare(Claim("a", HIGHER, _boots(103.0, WIDE), base, 0.1), 0.05 / 3, 0.03)
    assert at_holm_level.verdict is Verdict.INCONCLUSIVE


# --- equivalence, expectations and the boots that would decide ---------------------


def test_a_point_estimate_inside_the_tolerance_is_not_enough_to_pass() -> None:
    """3% slower with an 8% spread on 4 boots: inside the 10% tolerance, but the lower bound is not: INCONCLUSIVE, with boots to decide it."""
    result = _compare(HIGHER, _boots(97.0, WIDE), _boots(100.0, WIDE))
    assert result.ratio > 1 - result.tolerance
    assert result.lower < 1 - result.tolerance
    assert result.verdict is Verdict.INCONCLUSIVE
    assert result.boots_to_decide is not None and result.boots_to_decide > 4


@pytest.mark.parametrize(
    ("op", "bound", "direction", "threshold"),
    [(">=", 1.3, HIGHER, 1.3), (">", 2.0, HIGHER, 2.0), ("<=", 0.8, LOWER, 1.25), ("<", 0.5, LOWER, 2.0)],
)
def test_expectation_as_a_claim(op: str, bound: float, direction: str, threshold: float) -> None:
    claimed_direction, claimed_threshold = expectation(op, bound)
    assert claimed_direction == direction and claimed_threshold == pytest.approx(threshold)


@pytest.mark.parametrize("op", ["==", "!="])
def test_expectation_rejects_equality(op: str) -> None:
    with pytest.raises(ValueError, match=op):
        expectation(op, 1.0)


@settings(max_examples=100)
@given(log_sample_values(), log_sample_values(), st.sampled_from([">=", "<="]), st.floats(0.2, 5.0), alphas, cv_floors)
def test_an_expected_ratio_passes_on_its_lower_bound_and_fails_on_its_upper(
    current: LogSample, reference: LogSample, op: str, k: float, alpha: float, cv: float
) -> None:
    """`>= k`: PASS iff the lower bound of measured/reference >= k, FAIL iff its upper bound < k; `<= k` the mirror image."""
    direction, threshold = expectation(op, k)
    result = compare(
        Claim("f", direction, current, reference, 0.1, threshold=threshold, expected=f"{op} {k}"), alpha, cv
    )
    low, high = result.raw_bounds
    assert low <= result.raw_ratio * (1 + 1e-9) and result.raw_ratio <= high * (1 + 1e-9)
    assert result.raw_ratio == pytest.approx(math.exp(current.mean - reference.mean), rel=1e-9)
    passes, fails = (low >= k, high < k) if op == ">=" else (high <= k, low > k)
    if result.verdict is Verdict.PASS:
        assert passes or math.isclose(low if op == ">=" else high, k, rel_tol=1e-9)
    if result.verdict is Verdict.FAIL:
        assert fails or math.isclose(high if op == ">=" else low, k, rel_tol=1e-9)
    if passes and not math.isclose(low if op == ">=" else high, k, rel_tol=1e-9):
        assert result.verdict is Verdict.PASS
    assert not result.improved


def test_four_slots_expected_to_beat_one_by_1_3() -> None:
    """Twice the throughput on 4 boots a side with 1% spread: PASS `>= 1.3`; the same against `>= 3` FAILs."""
    four, one = _boots(60.0, TIGHT), _boots(30.0, TIGHT)
    met = compare(Claim("effective_tps", HIGHER, four, one, 0.1, threshold=1.3, expected=">= 1.3"), 0.01, 0.03)
    assert met.verdict is Verdict.PASS and met.raw_ratio == pytest.approx(2.0) and met.raw_bounds[0] >= 1.3
    missed = compare(Claim("effective_tps", HIGHER, four, one, 0.1, threshold=3.0, expected=">= 3"), 0.01, 0.03)
    assert missed.verdict is Verdict.FAIL and missed.raw_bounds[1] < 3.0


def _t_se(n: int, sd_c: float, sd_b: float, alpha: float) -> float:
    """t(1 - alpha, Welch df) x se for n boots a side, written out again."""
    vc, vb = sd_c**2 / n, sd_b**2 / n
    df = max((vc + vb) ** 2 / ((vc**2 + vb**2) / (n - 1)), 1.0)
    return float(stats.t.ppf(1 - alpha, df)) * math.sqrt(vc + vb)


sds = st.floats(min_value=0.005, max_value=0.5)
gaps = st.floats(min_value=0.001, max_value=1.0)


@settings(max_examples=100)
@given(gaps, sds, sds, alphas)
def test_boots_to_decide_is_the_first_n_whose_bound_clears(gap: float, sd_c: float, sd_b: float, alpha: float) -> None:
    """At the n returned, the bound of a rerun landing on the measured ratio clears the margin; at n - 1 it did not."""
    n = boots_to_decide(-0.1 + gap, -0.1, sd_c, sd_b, alpha)
    if n is None:
        assert _t_se(BOOTS_LIMIT, sd_c, sd_b, alpha) > gap
        return
    assert 2 <= n <= BOOTS_LIMIT
    assert _t_se(n, sd_c, sd_b, alpha) <= gap * (1 + 1e-9)
    if n > 2:
        assert _t_se(n - 1, sd_c, sd_b, alpha) > gap
    assert boots_to_decide(-0.1 - gap, -0.1, sd_c, sd_b, alpha) == n  # a drop as far below decides as soon


@settings(max_examples=100)
@given(gaps, sds, sds, st.floats(min_value=1.0, max_value=5.0), alphas)
def test_boots_to_decide_grows_with_the_spread_and_shrinks_with_the_gap(
    gap: float, sd_c: float, sd_b: float, k: float, alpha: float
) -> None:
    """`k` times the spread never needs fewer boots; `k` times the distance from the threshold never needs more."""
    base = boots_to_decide(gap, 0.0, sd_c, sd_b, alpha)
    wider = boots_to_decide(gap, 0.0, k * sd_c, k * sd_b, alpha)
    farther = boots_to_decide(k * gap, 0.0, sd_c, sd_b, alpha)
    limit = BOOTS_LIMIT + 1
    assert (wider or limit) >= (base or limit)
    assert (farther or limit) <= (base or limit)


def test_boots_to_decide_on_the_threshold_is_none() -> None:
    """A ratio exactly on the threshold is never most likely decided, however many boots."""
    assert boots_to_decide(-0.1, -0.1, 0.05, 0.05, 0.01) is None
    assert boots_to_decide(0.0, -0.1, 0.0, 0.0, 0.01) == 2
