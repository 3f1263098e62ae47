"""The A/B gate's confidence sequence: its closed forms agree with each other, and the stopping rule keeps alpha."""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_swarm.core.figure_names import DEFAULT_TOLERANCE, HIGHER, LOWER
from pytest_swarm.gate import sequential
from pytest_swarm.gate.statistics import PairedClaim, Verdict, compare_paired_all

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import gate_simulation

logs = st.lists(st.floats(min_value=-0.5, max_value=0.5, allow_nan=False), min_size=2, max_size=40)
alphas = st.sampled_from([0.001, 0.01, 0.05, 0.2])


@given(logs, alphas, st.floats(min_value=-0.6, max_value=0.6))
def test_the_interval_excludes_exactly_the_margins_the_anytime_p_value_rejects(
    values: list[float], alpha: float, margin: float
) -> None:
    """Two closed forms of one rule: the running interval's bounds and the mixture's p-values decide alike."""
    lower, upper = sequential.running_interval(values, alpha)
    below = sequential.anytime_p(values, margin, below=True)
    above = sequential.anytime_p(values, margin, below=False)
    if not (math.isclose(upper, margin, abs_tol=1e-9) or math.isclose(lower, margin, abs_tol=1e-9)):
        assert (upper < margin) == (below <= alpha)
        assert (lower > margin) == (above <= alpha)


@given(logs, alphas)
def test_a_wider_alpha_never_gives_a_wider_interval_and_more_pairs_never_widen_it(
    values: list[float], alpha: float
) -> None:
    lower, upper = sequential.running_interval(values, alpha)
    wide_lower, wide_upper = sequential.running_interval(values, alpha / 10)
    assert wide_lower <= lower + 1e-12 and upper <= wide_upper + 1e-12
    shorter = sequential.running_interval(values[:-1], alpha)
    assert shorter[0] <= lower + 1e-12 and upper <= shorter[1] + 1e-12, "the running intersection only narrows"


@given(logs, st.floats(min_value=0.1, max_value=10), st.floats(min_value=-1, max_value=1))
def test_the_evidence_is_invariant_to_scale_and_shift(values: list[float], scale: float, shift: float) -> None:
    """The mixture is scale-invariant (unknown spread) and about the mean's distance to mu0 only."""
    mu0 = 0.05
    base = sequential.log_mixture(values, mu0)
    moved = sequential.log_mixture([v * scale + shift for v in values], mu0 * scale + shift)
    assert math.isclose(base, moved, rel_tol=1e-6, abs_tol=1e-6) or (math.isinf(base) and math.isinf(moved))


def test_too_few_pairs_cannot_decide_whatever_they_show() -> None:
    """With an unknown spread, a handful of pairs proves nothing at alpha 0.01: the radius is infinite until then."""
    assert sequential.radius(2, 1e-9, 0.01) == math.inf
    assert sequential.radius(5, 1e-9, 0.01) == math.inf
    assert sequential.radius(6, 1.0, 0.01) < math.inf


@given(st.floats(min_value=0.005, max_value=0.5), st.floats(min_value=0.01, max_value=0.2))
def test_samples_to_decide_is_the_first_n_whose_radius_is_within_the_gap(gap: float, sd: float) -> None:
    n = sequential.samples_to_decide(gap, sd, 0.01)
    if n is None:
        assert sequential.radius(sequential.SAMPLES_LIMIT, (sequential.SAMPLES_LIMIT - 1) * sd * sd, 0.01) > gap
    else:
        assert sequential.radius(n, (n - 1) * sd * sd, 0.01) <= gap
        assert n == 2 or sequential.radius(n - 1, (n - 2) * sd * sd, 0.01) > gap


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


def test_an_undecided_claim_says_how_many_pairs_would_likely_decide_it() -> None:
    rng = random.Random(5)
    (claim,) = compare_paired_all([_claim([rng.gauss(0.02, 0.06) for _ in range(8)])], 0.01)
    assert claim.verdict is Verdict.INCONCLUSIVE
    assert claim.samples_to_decide is not None and claim.samples_to_decide > 8


@pytest.mark.parametrize(
    "runner", [r for r in gate_simulation.RUNNERS if r.name in ("quiet", "all of them")], ids=lambda r: r.name
)
def test_the_stopping_rule_keeps_false_alarms_at_or_under_alpha_at_the_threshold(
    runner: gate_simulation.Runner,
) -> None:
    """800 seeded items exactly at the threshold, searched pair by pair as the session does, on a runner with drift, a step,
    outliers, heavy tails and boot effects: no more than alpha of them FAIL (the FAIL test's false alarm) or PASS."""
    fail, passed, _ = gate_simulation.rates(runner, 1.0 - DEFAULT_TOLERANCE, 800, seed=11)
    assert fail <= gate_simulation.ALPHA and passed <= gate_simulation.ALPHA


@settings(deadline=None, max_examples=20)
@given(st.integers(min_value=0, max_value=10_000))
def test_a_25_percent_regression_fails_on_a_noisy_runner_and_an_unchanged_server_never_does(seed: int) -> None:
    rng = random.Random(seed)
    runner = gate_simulation.RUNNERS[-1]
    dropped, _ = gate_simulation.search(gate_simulation.samples(gate_simulation.pairs(rng, runner, math.log(0.75))))
    same, _ = gate_simulation.search(gate_simulation.samples(gate_simulation.pairs(rng, runner, 0.0)))
    assert same is not Verdict.FAIL
    assert dropped is not Verdict.PASS
