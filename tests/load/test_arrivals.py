"""Open-loop schedules against their definitions: seeded, ascending, inside the duration, at the asked rate."""

from __future__ import annotations

import itertools
import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm.load.arrivals import offsets
from pytest_swarm.specs import OpenLoop, SpecError

rates = st.floats(min_value=0.1, max_value=500.0, allow_nan=False)


@given(rate=rates, requests=st.integers(1, 300))
def test_constant_sends_one_every_period(rate: float, requests: int) -> None:
    times = offsets(OpenLoop(rate=rate, requests=requests))
    assert len(times) == requests and times[0] == 0.0
    assert all(math.isclose(b - a, 1 / rate, rel_tol=1e-9) for a, b in itertools.pairwise(times))


@given(
    rate=rates,
    duration=st.floats(min_value=0.5, max_value=60.0),
    kind=st.sampled_from(["constant", "poisson", "burst"]),
    seed=st.integers(0, 2**31),
)
def test_every_schedule_ascends_from_zero_inside_its_duration_and_repeats_with_its_seed(
    rate: float, duration: float, kind: str, seed: int
) -> None:
    spec = OpenLoop(
        rate=rate, arrival=kind, burst_shape=0.5 if kind == "burst" else None, duration_s=duration, seed=seed
    )
    times = offsets(spec)
    assert times[0] == 0.0 and all(b >= a for a, b in itertools.pairwise(times))
    assert times[-1] < duration
    assert offsets(spec) == times, "the same seed gives the same schedule"


@pytest.mark.parametrize(("kind", "shape", "cv"), [("poisson", None, 1.0), ("burst", 0.25, 2.0), ("burst", 4.0, 0.5)])
def test_random_gaps_have_the_asked_mean_and_their_process_spread(kind: str, shape: float | None, cv: float) -> None:
    """Poisson gaps: mean 1/rate, CV 1; gamma (burst) of shape k: CV 1/sqrt(k), so below 1 they bunch, above they even out."""
    times = offsets(OpenLoop(rate=10.0, arrival=kind, burst_shape=shape, requests=20000, seed=3))
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert statistics.fmean(gaps) == pytest.approx(0.1, rel=0.05)
    assert statistics.stdev(gaps) / statistics.fmean(gaps) == pytest.approx(cv, rel=0.08)


@given(start=st.floats(0.0, 50.0), end=st.floats(0.0, 50.0), duration=st.floats(1.0, 30.0))
def test_a_ramp_sends_as_its_integrated_rate_grows(start: float, end: float, duration: float) -> None:
    if start + end < 0.2:
        return
    times = offsets(OpenLoop(arrival="ramp", ramp=(start, end), duration_s=duration))
    assert times[0] == 0.0 and all(b > a for a, b in itertools.pairwise(times))
    assert times[-1] <= duration + 1e-9
    assert len(times) == max(1, math.ceil((start + end) / 2 * duration - 1e-9))
    for n, t in enumerate(times):  # the n-th send is where the integrated rate reaches n
        assert start * t + (end - start) * t * t / (2 * duration) == pytest.approx(n, abs=1e-6)


def test_a_rising_ramp_sends_ever_closer_together() -> None:
    times = offsets(OpenLoop(arrival="ramp", ramp=(1.0, 9.0), duration_s=10.0))
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps == sorted(gaps, reverse=True) and len(times) == 50


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rate": 0.0, "requests": 3}, "rate must be > 0"),
        ({"rate": 2.0}, "needs duration= .* or requests="),
        ({"rate": 2.0, "arrival": "zipf", "requests": 3}, "arrival must be one of"),
        ({"rate": 2.0, "requests": 0}, "requests must be a positive int"),
    ],
)
def test_a_bad_open_loop_spec_says_what(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        OpenLoop(**kwargs)  # type: ignore[arg-type]
