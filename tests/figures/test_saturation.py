"""The saturation rate of a sweep: both signs, served rate flattening and TTFT climbing, at the same step."""

from __future__ import annotations

import itertools

from hypothesis import assume, given
from hypothesis import strategies as st

from pytest_swarm.figures.saturation import RatePoint, saturation

rates = st.lists(st.floats(0.1, 100.0), min_size=2, max_size=8, unique=True)


@given(offered=rates, ttft=st.floats(0.01, 5.0))
def test_a_server_that_serves_what_it_is_offered_never_saturates(offered: list[float], ttft: float) -> None:
    assert saturation([RatePoint(r, r, r * 0.98, ttft) for r in offered]) is None


@given(offered=rates, ceiling=st.floats(0.05, 50.0))
def test_a_ceiling_with_a_queue_behind_it_is_found_at_the_first_step_past_it(
    offered: list[float], ceiling: float
) -> None:
    """Served min(offered, ceiling); TTFT grows past the ceiling: saturation sits at the first rate served under 80% of it.

    The sweep starts below the ceiling, so its lowest rate shows the TTFT of a server that keeps up.
    """
    assume(min(offered) <= ceiling)
    points = [RatePoint(r, r, min(r, ceiling), 0.1 if r <= ceiling else 1.0 + r) for r in offered]
    found = saturation(points)
    ordered = sorted(offered)
    expected = next(
        ((a, b) for a, b in itertools.pairwise(ordered) if min(b, ceiling) < 0.8 * b and b > ceiling),
        None,
    )
    assert (None if found is None else (found[0].offered, found[1].offered)) == expected


def test_one_sign_alone_is_not_saturation() -> None:
    behind_but_fast = [RatePoint(1, 1, 1.0, 0.2), RatePoint(2, 2, 1.2, 0.25)]
    slow_but_served = [RatePoint(1, 1, 1.0, 0.2), RatePoint(2, 2, 2.0, 0.9)]
    assert saturation(behind_but_fast) is None and saturation(slow_but_served) is None
    both = [RatePoint(1, 1, 1.0, 0.2), RatePoint(2, 2, 1.1, 0.9)]
    assert saturation(both) == (both[0], both[1])


def test_a_poisson_schedule_that_sent_less_than_the_rate_below_it_is_not_saturation() -> None:
    """Seen in the README's run: 2/s sent 1.41 a second against 1/s's 1.5, all served; TTFT rose with the load only."""
    points = [RatePoint(1, 1.5, 1.52, 0.363), RatePoint(2, 1.41, 1.42, 1.028), RatePoint(4, 3.41, 2.16, 3.698)]
    assert saturation(points) == (points[1], points[2])


def test_one_disturbed_low_rate_does_not_hide_the_climb() -> None:
    """Measured here beside another job: r1's TTFT p95 7.4 s, r2's 1.2 s, r4's 7.1 s with the served rate flat."""
    points = [RatePoint(1, 1.5, 0.73, 7.42), RatePoint(2, 1.41, 1.40, 1.19), RatePoint(4, 3.41, 1.67, 7.12)]
    assert saturation(points) == (points[1], points[2])
