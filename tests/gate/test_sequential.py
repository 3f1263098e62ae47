"""The capacity search's confidence sequence: its bounds only narrow, cannot decide on a handful of values, and read
only the values' distance to the margin."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm.gate import sequential

logs = st.lists(st.floats(min_value=-0.5, max_value=0.5, allow_nan=False), min_size=2, max_size=40)
alphas = st.sampled_from([0.001, 0.01, 0.05, 0.2])


@given(logs, st.floats(min_value=0.1, max_value=10), st.floats(min_value=-1, max_value=1), alphas)
def test_the_interval_moves_with_scale_and_shift(values: list[float], scale: float, shift: float, alpha: float) -> None:
    """The mixture is scale-invariant (unknown spread): the interval of moved values is the moved interval."""
    lower, upper = sequential.running_interval(values, alpha)
    moved = sequential.running_interval([v * scale + shift for v in values], alpha)
    for was, now in zip((lower, upper), moved, strict=True):
        if math.isinf(was):
            assert math.isinf(now)
        else:
            assert math.isclose(was * scale + shift, now, rel_tol=1e-6, abs_tol=1e-6)


def test_too_few_values_cannot_decide_whatever_they_show() -> None:
    """With an unknown spread, a handful of values proves nothing at alpha 0.01: the radius is infinite until then."""
    assert sequential.radius(2, 1e-9, 0.01) == math.inf
    assert sequential.radius(5, 1e-9, 0.01) == math.inf
    assert sequential.radius(6, 1.0, 0.01) < math.inf
