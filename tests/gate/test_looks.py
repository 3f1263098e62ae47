"""The A/B rule's planned looks: the table bounds the chance it stands for, the bounds and p-values decide alike, and
the looks keep alpha wherever the search stops."""

from __future__ import annotations

import itertools
import math
import random
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import stdtr

from pytest_swarm.core.figure_names import DEFAULT_TOLERANCE, HIGHER, LOWER
from pytest_swarm.gate import looks, sequential
from pytest_swarm.gate.statistics import PairedClaim, Verdict, compare_paired_all

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import gate_simulation

logs = st.lists(st.floats(min_value=-0.5, max_value=0.5, allow_nan=False), min_size=2, max_size=40)
alphas = st.sampled_from([0.0001, 0.001, 0.005, 0.01, 0.05, 0.2])
levels = st.floats(min_value=1e-9, max_value=0.9)


def _smallest_look_p(series: int, seed: int) -> np.ndarray:
    """The smallest one-sided look p-value of `series` Gaussian sequences with the mean at the margin (the null)."""
    rng = np.random.default_rng(seed)
    ns = np.arange(looks.FIRST_LOOK, looks.LAST_LOOK + 1)
    z = rng.standard_normal((series, looks.LAST_LOOK))
    total = np.cumsum(z, axis=1)[:, looks.FIRST_LOOK - 1 :]
    squares = np.cumsum(z * z, axis=1)[:, looks.FIRST_LOOK - 1 :]
    mean = total / ns
    sd = np.sqrt((squares - ns * mean * mean) / (ns - 1))
    return np.asarray(stdtr(ns - 1, mean / (sd / np.sqrt(ns))).min(axis=1))


def test_the_looks_level_keeps_alpha_on_a_seeded_null_and_spends_most_of_it() -> None:
    """200,000 seeded null sequences (not the table's 10^7): the share any look rejects at nominal_level(alpha) is
    within three standard errors of alpha, never past them: the table is an upper bound and a tight one."""
    smallest = _smallest_look_p(200_000, seed=34)
    for alpha in (0.001, 0.01, 0.05):
        share = float((smallest < looks.nominal_level(alpha)).mean())
        se = math.sqrt(alpha * (1 - alpha) / smallest.size)
        assert alpha - 4 * se < share <= alpha + 3 * se, f"alpha {alpha}: {share} of the null sequences rejected"


def test_the_rules_p_value_covers_the_null_through_the_packages_own_functions() -> None:
    """The same through sequential_p on 10,000 seeded sequences of 30 samples at the margin, a 4% spread: each side
    rejects at alpha 0.01 in at most 0.01 + 3 standard errors of them."""
    rng = random.Random(7)
    margin, n = math.log(0.95), 10_000
    below = above = 0
    for _ in range(n):
        values = [margin + rng.gauss(0.0, 0.04) for _ in range(looks.LAST_LOOK)]
        below += looks.sequential_p(values, margin, below=True) < 0.01
        above += looks.sequential_p(values, margin, below=False) < 0.01
    bound = 0.01 + 3 * math.sqrt(0.01 * 0.99 / n)
    assert below / n <= bound and above / n <= bound


@given(levels, levels)
def test_overall_p_and_nominal_level_are_increasing(a: float, b: float) -> None:
    low, high = sorted((a, b))
    assert looks.overall_p(low) <= looks.overall_p(high)
    assert looks.nominal_level(low) <= looks.nominal_level(high)


@given(levels)
def test_the_nominal_level_never_spends_more_than_alpha_and_is_never_below_bonferronis(alpha: float) -> None:
    nominal = looks.nominal_level(alpha)
    assert looks.overall_p(nominal) <= alpha * (1 + 1e-9)
    assert nominal >= alpha / (looks.LAST_LOOK - looks.FIRST_LOOK + 1)


@given(logs, alphas, st.floats(min_value=-0.6, max_value=0.6))
def test_the_interval_excludes_exactly_the_margins_the_p_value_rejects(
    values: list[float], alpha: float, margin: float
) -> None:
    """Two forms of one rule: the running interval's bounds and the looks' p-values decide alike."""
    lower, upper = looks.running_interval(values, alpha)
    if not (math.isclose(upper, margin, abs_tol=1e-9) or math.isclose(lower, margin, abs_tol=1e-9)):
        assert (upper < margin) == (looks.sequential_p(values, margin, below=True) < alpha)
        assert (lower > margin) == (looks.sequential_p(values, margin, below=False) < alpha)


@pytest.mark.parametrize("interval", [looks.running_interval, sequential.running_interval], ids=["looks", "mixture"])
@given(values=logs, alpha=alphas)
def test_a_wider_alpha_never_gives_a_wider_interval_and_more_samples_never_widen_it(
    interval: Callable[[Sequence[float], float], tuple[float, float]], values: list[float], alpha: float
) -> None:
    """Both rules' intervals: the planned looks' (A/B) and Lai's mixture's (the capacity search)."""
    lower, upper = interval(values, alpha)
    wide_lower, wide_upper = interval(values, alpha / 10)
    assert wide_lower <= lower + 1e-12 and upper <= wide_upper + 1e-12
    shorter = interval(values[:-1], alpha)
    assert shorter[0] <= lower + 1e-12 and upper <= shorter[1] + 1e-12, "the running intersection only narrows"


@given(logs, st.floats(min_value=-0.6, max_value=0.6), st.booleans())
def test_the_evidence_only_grows_with_samples_so_a_decision_once_reached_stays(
    values: list[float], margin: float, below: bool
) -> None:
    ps = [looks.sequential_p(values[:n], margin, below) for n in range(1, len(values) + 1)]
    assert all(later <= earlier for earlier, later in itertools.pairwise(ps))


@given(st.floats(min_value=1e-4, max_value=1.0), alphas)
def test_at_a_fixed_spread_the_bound_tightens_with_every_look(sd: float, alpha: float) -> None:
    nominal = looks.nominal_level(alpha)
    radii = [looks.radius(looks.Look(n, 0.0, sd), nominal) for n in range(looks.FIRST_LOOK, looks.LAST_LOOK + 1)]
    assert all(r > later for r, later in itertools.pairwise(radii))


@given(logs, st.floats(min_value=0.1, max_value=10), st.floats(min_value=-1, max_value=1), st.booleans())
def test_the_evidence_is_invariant_to_scale_and_shift(
    values: list[float], scale: float, shift: float, below: bool
) -> None:
    """The t statistics are: the spread is measured, not assumed, and only the mean's distance to the margin counts."""
    margin = 0.05
    base = looks.sequential_p(values, margin, below)
    moved = looks.sequential_p([v * scale + shift for v in values], margin * scale + shift, below)
    assert math.isclose(base, moved, rel_tol=1e-6, abs_tol=1e-9)


@given(st.lists(st.floats(min_value=-0.5, max_value=0.5), max_size=looks.FIRST_LOOK - 1), alphas)
def test_nothing_is_decided_before_the_first_look(values: list[float], alpha: float) -> None:
    assert looks.running_interval(values, alpha) == (-math.inf, math.inf)
    assert looks.sequential_p(values, 0.0, below=True) == 1.0


def test_a_sequence_without_spread_is_certain_on_its_side_of_the_margin() -> None:
    assert looks.sequential_p([0.1] * 6, 0.0, below=False) == 0.0
    assert looks.sequential_p([0.1] * 6, 0.0, below=True) == 1.0
    assert looks.running_interval([0.1] * 6, 0.01) == (0.1, 0.1)


@given(st.floats(min_value=0.005, max_value=0.5), st.floats(min_value=0.01, max_value=0.2), alphas)
def test_samples_to_decide_is_the_first_look_whose_bound_is_within_the_gap(gap: float, sd: float, alpha: float) -> None:
    n = looks.samples_to_decide(gap, sd, alpha)
    nominal = looks.nominal_level(alpha)

    def radius(k: int) -> float:
        return looks.radius(looks.Look(k, 0.0, sd), nominal)

    if n is None:
        assert radius(looks.LAST_LOOK) > gap
    else:
        assert looks.FIRST_LOOK <= n <= looks.LAST_LOOK and radius(n) <= gap
        assert n == looks.FIRST_LOOK or radius(n - 1) > gap


def _claim(diffs: list[float], direction: str = HIGHER, tolerance: float = 0.05) -> PairedClaim:
    return PairedClaim("effective_tps", direction, tuple(diffs), 1.0, 1.0, tolerance)


def test_a_clear_regression_fails_and_an_unchanged_server_passes_with_the_samples_counted() -> None:
    rng = random.Random(3)
    (drop,) = compare_paired_all([_claim([math.log(0.7) + rng.gauss(0, 0.03) for _ in range(12)])], 0.01)
    (same,) = compare_paired_all([_claim([rng.gauss(0, 0.02) for _ in range(30)])], 0.01)
    assert drop.verdict is Verdict.FAIL and drop.samples == 12 and drop.upper < 0.95
    assert same.verdict is Verdict.PASS and same.lower >= 0.95 and 0.97 < same.ratio < 1.03


def test_lower_is_better_figures_are_turned_the_right_way() -> None:
    """TTFT twice as long on the candidate is a regression: its better-is-up ratio is about 0.5."""
    (slower,) = compare_paired_all([_claim([math.log(2.0) + 0.01 * (i % 3) for i in range(12)], direction=LOWER)], 0.01)
    assert slower.verdict is Verdict.FAIL and 0.45 < slower.ratio < 0.55


def test_an_undecided_claim_says_at_which_look_it_would_likely_be_decided() -> None:
    """Six samples 3% up spreading 5%: not yet PASSed, and the look at the 9th would likely PASS them."""
    (claim,) = compare_paired_all([_claim([0.08, -0.02] * 3)], 0.01)
    assert claim.verdict is Verdict.INCONCLUSIVE
    assert claim.samples_to_decide == 9


@pytest.mark.parametrize(
    "runner", [r for r in gate_simulation.RUNNERS if r.name in ("measured", "all of them")], ids=lambda r: r.name
)
def test_the_stopping_rule_keeps_false_alarms_near_alpha_at_the_threshold(runner: gate_simulation.Runner) -> None:
    """400 seeded items exactly at the threshold, searched sample by sample as the session does, on the measured
    runner and one with drift, a step, outliers and heavy tails besides: the FAIL and PASS rates stay within three
    standard errors of alpha (the rule spends alpha exactly; benchmarks/gate_simulation_results.txt has 10,000)."""
    rates = gate_simulation.rates(runner, 1.0 - DEFAULT_TOLERANCE, 400, seed=11)
    bound = gate_simulation.ALPHA + 3 * math.sqrt(gate_simulation.ALPHA / 400)
    assert rates.fail <= bound and rates.passed <= bound


@settings(deadline=None, max_examples=20)
@given(st.integers(min_value=0, max_value=10_000))
def test_a_25_percent_regression_fails_on_a_noisy_runner_and_an_unchanged_server_never_does(seed: int) -> None:
    rng = random.Random(seed)
    runner = gate_simulation.RUNNERS[-1]
    dropped, _ = gate_simulation.search(gate_simulation.samples(gate_simulation.pairs(rng, runner, math.log(0.75))))
    same, _ = gate_simulation.search(gate_simulation.samples(gate_simulation.pairs(rng, runner, 0.0)))
    assert same is not Verdict.FAIL
    assert dropped is not Verdict.PASS
