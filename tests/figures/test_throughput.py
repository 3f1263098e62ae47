"""A round's throughput factors (figures/throughput.py): streams decoding at once times tokens a second a stream is the
round's effective tok/s, whatever its requests; a round with nothing decoded has no factors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm.core.records import RequestRecord, RoundRecord
from pytest_swarm.figures.summary import round_figures
from pytest_swarm.figures.throughput import AT_ONCE, PER_STREAM, throughput_factors

request = st.builds(
    lambda start, first, gaps, failed: RequestRecord(
        agent=0,
        start=start,
        end=start + first + sum(gaps),
        token_times=[start + first + sum(gaps[:i]) for i in range(len(gaps) + 1)],
        output_tokens=len(gaps) + 1,
        error="HTTP 500" if failed else None,
    ),
    st.floats(0.0, 5.0),
    st.floats(0.001, 2.0),
    st.lists(st.floats(0.001, 0.2), min_size=1, max_size=40),
    st.booleans(),
)


@given(st.lists(request, min_size=1, max_size=12))
def test_the_factors_multiply_to_the_rounds_effective_tps(requests: list[RequestRecord]) -> None:
    wall = max(r.end for r in requests)
    figures = round_figures(RoundRecord(concurrency=len(requests), wall_s=wall, requests=requests)).figures
    if not any(r.ok for r in requests):
        assert figures[AT_ONCE] is None and figures[PER_STREAM] is None
        return
    at_once, per_stream = figures[AT_ONCE], figures[PER_STREAM]
    assert at_once is not None and per_stream is not None
    assert at_once * per_stream == pytest.approx(figures["effective_tps"], rel=1e-9)
    assert at_once <= sum(1 for r in requests if r.ok), "no more streams decoding at once than requests"


def test_time_before_the_first_token_is_time_not_decoding() -> None:
    """Two requests served one after the other, each waiting 1 s for its first token and decoding 1 s: one stream
    decoding half the time at most; served together, both at once."""
    one_by_one = [
        RequestRecord(agent=0, start=0.0, end=2.0, token_times=[1.0, 2.0], output_tokens=2),
        RequestRecord(agent=1, start=0.0, end=4.0, token_times=[3.0, 4.0], output_tokens=2),
    ]
    together = [
        RequestRecord(agent=0, start=0.0, end=2.0, token_times=[1.0, 2.0], output_tokens=2),
        RequestRecord(agent=1, start=0.0, end=2.0, token_times=[1.0, 2.0], output_tokens=2),
    ]
    assert throughput_factors(one_by_one, 4.0) == {AT_ONCE: 0.5, PER_STREAM: 2.0}
    assert throughput_factors(together, 2.0) == {AT_ONCE: 1.0, PER_STREAM: 2.0}
    assert throughput_factors([], 1.0) == {AT_ONCE: None, PER_STREAM: None}
