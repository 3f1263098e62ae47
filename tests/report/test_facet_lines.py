"""The line under a rate sweep: saturation located, kept up, or behind with no step showing both signs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm.figures.saturation import BEHIND, RatePoint
from pytest_swarm.report.facet_lines import sweep_verdict

points = st.lists(
    st.builds(
        RatePoint,
        st.floats(0.1, 100.0),
        st.floats(0.1, 100.0),
        st.floats(0.0, 100.0),
        st.none() | st.floats(0.01, 30.0),
    ),
    min_size=2,
    max_size=6,
    unique_by=lambda p: p.asked,
)


@given(points)
def test_kept_up_is_said_only_of_a_sweep_served_at_every_rate(sweep: list[RatePoint]) -> None:
    verdict = sweep_verdict(sweep)
    lagging = any(p.served < BEHIND * p.offered for p in sweep)
    if verdict.startswith("saturates between"):
        assert lagging, "a located saturation has a rate served under 80% of what was sent"
    else:
        assert verdict.startswith("kept up" if not lagging else "saturation not located"), verdict


def test_a_sweep_that_starts_saturated_says_so_and_does_not_claim_it_kept_up() -> None:
    """Both rates served half what was sent, TTFT already high at the lowest: no climb to locate, and not kept up."""
    verdict = sweep_verdict([RatePoint(1, 1.0, 0.5, 6.0), RatePoint(2, 2.0, 0.55, 7.0)])
    assert verdict.startswith(
        "saturation not located: served under 80% of the rate sent at 1/s (sent 1, served 0.5 req/s), 2/s"
    )
    assert verdict.endswith("start the sweep lower")


def test_a_late_fall_behind_without_a_climb_is_not_located() -> None:
    verdict = sweep_verdict([RatePoint(1, 1.0, 1.0, 0.2), RatePoint(2, 2.0, 1.2, 0.25)])
    assert verdict.startswith(
        "saturation not located: served under 80% of the rate sent at 2/s (sent 2, served 1.2 req/s);"
    )
    assert "TTFT p95 stayed within 2x" in verdict


def test_both_signs_at_a_step_locate_it_and_every_rate_served_keeps_up() -> None:
    assert sweep_verdict([RatePoint(1, 1.0, 1.0, 0.2), RatePoint(2, 2.0, 1.1, 0.9)]).startswith(
        "saturates between 1/s and 2/s"
    )
    assert sweep_verdict([RatePoint(1, 1.0, 1.0, 0.2), RatePoint(2, 2.0, 1.9, 0.9)]).startswith(
        "kept up to 2/s (sent 2, served 1.9"
    )
