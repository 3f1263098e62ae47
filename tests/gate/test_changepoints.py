"""Change points over one figure's history (changepoints.py): steps no single run failed, and nothing in plain noise.

Synthetic series with seeded noise, so each case is deterministic: the shapes the
issue names (a 10% step, flat 3% noise, three 3% steps in a row) and the edges
(too short, constant, an outlier, direction).
"""

from __future__ import annotations

import random

from pytest_swarm.core.figure_names import HIGHER, LOWER
from pytest_swarm.gate.changepoints import MIN_RUNS, change_points, noise


def _noisy(levels: list[float], runs_each: int, cv: float = 0.03, seed: int = 7) -> list[float]:
    rng = random.Random(seed)
    return [level * rng.lognormvariate(0.0, cv) for level in levels for _ in range(runs_each)]


def test_a_ten_percent_step_is_found_where_it_happened_and_called_a_regression() -> None:
    series = _noisy([100.0, 90.0], runs_each=15)
    found = change_points(series, HIGHER)
    assert [c.index for c in found] == [15]
    assert 0.87 < found[0].ratio < 0.93
    assert found[0].regression
    assert "worse" in found[0].describe()


def test_the_same_step_in_a_latency_is_an_improvement() -> None:
    found = change_points(_noisy([2.0, 1.8], runs_each=15), LOWER)
    assert [c.index for c in found] == [15]
    assert not found[0].regression


def test_a_flat_series_with_three_percent_noise_is_clean() -> None:
    assert change_points(_noisy([100.0], runs_each=30), HIGHER) == []


def test_flat_noise_is_rarely_flagged_over_many_seeds() -> None:
    """The false-alarm rate the module states (about 2%), checked loosely over 50 seeded histories."""
    flagged = sum(bool(change_points(_noisy([100.0], runs_each=30, seed=seed), HIGHER)) for seed in range(50))
    assert flagged <= 4


def test_three_successive_three_percent_steps_are_found() -> None:
    """Slow drift: each step inside the gate's tolerance, 9% in all."""
    series = _noisy([100.0, 97.0, 94.09, 91.27], runs_each=10)
    found = change_points(series, HIGHER)
    assert found
    assert all(c.regression for c in found)
    assert all(10 <= c.index <= 30 for c in found)


def test_one_outlier_is_not_a_step() -> None:
    series = _noisy([100.0], runs_each=20)
    series[10] *= 0.7
    assert change_points(series, HIGHER) == []


def test_a_constant_series_and_a_short_one_flag_nothing() -> None:
    assert change_points([50.0] * 20, HIGHER) == []
    assert change_points([100.0, 100.0, 50.0, 50.0, 50.0], HIGHER) == []  # fewer than two levels of MIN_RUNS


def test_a_clean_step_without_noise_is_found() -> None:
    series = [100.0] * MIN_RUNS + [80.0] * MIN_RUNS
    found = change_points(series, HIGHER)
    assert [(c.index, round(c.before), round(c.after)) for c in found] == [(MIN_RUNS, 100, 80)]


def test_non_positive_values_are_not_analysed() -> None:
    assert change_points([100.0] * 10 + [0.0] * 10, HIGHER) == []


def test_noise_ignores_a_step_and_has_a_floor() -> None:
    import math

    logs = [math.log(v) for v in _noisy([100.0, 50.0], runs_each=20)]
    assert 0.02 < noise(logs) < 0.045
    assert noise([0.0] * 10) == 0.005
