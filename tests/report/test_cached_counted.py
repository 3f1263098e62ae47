"""The per-turn lines report cached prompt tokens as counted: a mean above zero never prints as 0."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm.report.facet_lines import _cached


@given(st.floats(min_value=1e-9, max_value=1e6, allow_nan=False))
def test_a_mean_above_zero_never_reads_zero(mean: float) -> None:
    assert float(_cached(mean)) > 0


def test_whole_counts_read_whole_and_none_reads_a_dash() -> None:
    assert [_cached(v) for v in (0.0, 3.0, 0.25, 2.375, None)] == ["0", "3", "0.25", "2.4", "-"]
