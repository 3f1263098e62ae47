"""Every figure of metrics.py checked against its definition.

The records are built by hand (no server, no clock), so each figure can be
recomputed here from first principles and compared.
"""

from __future__ import annotations

import math
import random
import statistics
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from pytest_swarm.core.records import RequestRecord, RoundRecord
from pytest_swarm.figures.distribution import Distribution, quantile_floor
from pytest_swarm.figures.requests import inter_token_gaps
from pytest_swarm.figures.summary import ItemFigures, relative_to, round_figures, summarize

# --- strategies -----------------------------------------------------------------

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
durations = st.floats(min_value=0.0, max_value=100.0, allow_nan=False, allow_infinity=False)
errors = st.one_of(
    st.none(),
    st.sampled_from(["HTTP 500: boom", "timeout", "server error: {}\nmore detail", "x" * 300, ""]),
)


@st.composite
def request_records(draw: st.DrawFn) -> RequestRecord:
    """A request as the client could have seen it, successful or not."""
    start = draw(st.floats(min_value=0.0, max_value=1000.0))
    ttft = draw(durations)
    gaps = draw(st.lists(durations, max_size=8))
    times = [start + ttft]
    for gap in gaps:
        times.append(times[-1] + gap)
    if draw(st.booleans()) and gaps:
        times = times[: draw(st.integers(0, len(times)))]
    elif not draw(st.booleans()):
        times = []
    usage = draw(st.booleans())
    tokens = draw(st.integers(0, 12)) if usage else len(times)
    cached = draw(st.one_of(st.none(), st.integers(0, 500)))
    return RequestRecord(
        agent=draw(st.integers(0, 7)),
        start=start,
        end=(times[-1] if times else start) + draw(durations),
        token_times=times,
        output_tokens=tokens,
        usage_reported=usage,
        prompt_tokens=draw(st.one_of(st.none(), st.integers(1, 500))),
        cached_prompt_tokens=cached,
        error=draw(errors),
    )


@st.composite
def round_records(draw: st.DrawFn, concurrency: int | None = None) -> RoundRecord:
    c = concurrency if concurrency is not None else draw(st.integers(1, 8))
    return RoundRecord(
        concurrency=c,
        wall_s=draw(st.floats(min_value=0.001, max_value=1000.0)),
        requests=draw(st.lists(request_records(), max_size=6)),
    )


round_lists = st.integers(1, 8).flatmap(lambda c: st.lists(round_records(c), min_size=1, max_size=5))


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (Hyndman-Fan type 7), written out."""
    ordered = sorted(values)
    h = (len(ordered) - 1) * q / 100
    lo = math.floor(h)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (h - lo) * (ordered[hi] - ordered[lo])


def close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


# --- Distribution ---------------------------------------------------------------


def test_distribution_of_nothing_is_all_none() -> None:
    """An item whose requests all failed has no distribution: None, never 0 (a 0 would read as a measurement)."""
    d = Distribution.of([])
    assert d.n == 0
    assert (d.min, d.p50, d.p95, d.p99, d.max, d.mean, d.median) == (None,) * 7
    assert d.to_dict()["median"] is None


def test_distribution_example() -> None:
    """1..100: the percentiles land where numpy's linear method puts them."""
    d = Distribution.of([float(v) for v in range(1, 101)])
    assert d.n == 100
    assert (d.min, d.max, d.mean) == (1.0, 100.0, 50.5)
    assert d.p50 == pytest.approx(50.5)
    assert d.p95 == pytest.approx(95.05)
    assert d.p99 == pytest.approx(99.01)
    assert d.to_dict() == {
        "n": 100,
        "min": 1.0,
        "p50": d.p50,
        "p95": d.p95,
        "p99": d.p99,
        "max": 100.0,
        "mean": 50.5,
        "median": d.p50,
    }


@given(st.lists(finite, min_size=1, max_size=60))
def test_distribution_percentiles_are_ordered(values: list[float]) -> None:
    """`min <= p50 <= p95 <= p99 <= max`, and the mean lies between min and max."""
    d = Distribution.of(values)
    assert d.n == len(values)
    assert d.min is not None and d.max is not None and d.mean is not None
    assert d.p50 is not None and d.p95 is not None and d.p99 is not None
    assert d.min <= d.p50 <= d.p95 <= d.p99 <= d.max
    assert d.min == min(values) and d.max == max(values)
    assert d.min - 1e-9 * abs(d.min) <= d.mean <= d.max + 1e-9 * abs(d.max)
    assert d.median == d.p50


@given(st.lists(finite, min_size=1, max_size=60))
def test_distribution_matches_numpy_and_the_definition(values: list[float]) -> None:
    """Percentiles equal numpy.percentile (linear) and the hand-written type-7 definition; p50 is the median."""
    d = Distribution.of(values)
    assert d.p50 is not None and d.p95 is not None and d.p99 is not None and d.mean is not None
    expected = np.percentile(np.asarray(values), [50, 95, 99])
    assert (d.p50, d.p95, d.p99) == tuple(float(v) for v in expected)
    for got, q in ((d.p50, 50), (d.p95, 95), (d.p99, 99)):
        assert math.isclose(got, percentile(values, q), rel_tol=1e-9, abs_tol=1e-6)
    assert math.isclose(d.p50, statistics.median(values), rel_tol=1e-9, abs_tol=1e-6)
    assert math.isclose(d.mean, statistics.fmean(values), rel_tol=1e-9, abs_tol=1e-6)


@given(st.lists(finite, min_size=1, max_size=30), st.randoms())
def test_distribution_ignores_order(values: list[float], rnd: random.Random) -> None:
    """The pooled values arrive in completion order; the figures must not depend on it (the mean up to rounding)."""
    shuffled = list(values)
    rnd.shuffle(shuffled)
    a, b = Distribution.of(shuffled), Distribution.of(values)
    assert (a.n, a.min, a.p50, a.p95, a.p99, a.max) == (b.n, b.min, b.p50, b.p95, b.p99, b.max)
    assert close(a.mean, b.mean)


@given(st.integers(1, 3000), st.randoms(), st.sampled_from([0.5, 0.9, 0.99]), st.sampled_from([0.9, 0.95, 0.99]))
def test_the_quantile_floor_is_the_highest_order_statistic_that_covers_the_quantile(
    n: int, rnd: random.Random, q: float, confidence: float
) -> None:
    """x_(r) bounds the q-quantile from below with probability P(Binomial(n, q) >= r) (scipy's binomial), and
    scipy.stats.quantile_test's one-sided interval takes the same order statistic."""
    values = [rnd.random() for _ in range(n)]
    floor = quantile_floor(values, q, confidence)
    coverage = stats.binom.sf(np.arange(n), n, q)  # of x_(1) .. x_(n)
    covering = np.flatnonzero(coverage >= confidence - 1e-12)
    if floor is None:
        assert covering.size == 0
        return
    r = covering[-1] + 1
    assert floor == sorted(values)[r - 1], "the highest covering order statistic"
    low = stats.quantile_test(values, q=0.0, p=q, alternative="greater").confidence_interval(confidence).low
    assert floor == low or abs(coverage[r - 1] - confidence) < 1e-9, "scipy's, but where coverage ties the level"


# --- RequestRecord --------------------------------------------------------------


@given(
    st.floats(min_value=0, max_value=1000),
    st.lists(st.floats(min_value=0.001, max_value=10), min_size=1, max_size=20),
    st.integers(0, 5),
)
def test_decode_tps_definition(start: float, gaps: list[float], extra: int) -> None:
    """Decode speed in tok/s = (tokens - 1) / (last token - first token): the prefill (TTFT) is left out."""
    times = [start + 0.5]
    for gap in gaps:
        times.append(times[-1] + gap)
    tokens = len(times) + extra  # usage may report more tokens than content-carrying reads
    record = RequestRecord(agent=0, start=start, token_times=times, output_tokens=tokens)
    assert record.decode_tps == (tokens - 1) / (times[-1] - times[0])
    assert record.ttft == times[0] - start


@pytest.mark.parametrize(("tokens", "times"), [(0, []), (1, [1.0]), (1, [1.0, 2.0]), (5, [1.0]), (0, [1.0, 2.0])])
def test_decode_tps_needs_two_tokens(tokens: int, times: list[float]) -> None:
    """With fewer than two tokens (or two reads) there is no decode span: None, not a division by zero."""
    assert RequestRecord(agent=0, start=0.0, token_times=times, output_tokens=tokens).decode_tps is None


def test_decode_tps_zero_span_is_none() -> None:
    """Two tokens in one instant give no rate rather than infinity."""
    assert RequestRecord(agent=0, start=0.0, token_times=[1.0, 1.0], output_tokens=2).decode_tps is None


def test_ttft_and_ok() -> None:
    """TTFT is first token minus start; no token means no TTFT and not ok; an error is never ok."""
    record = RequestRecord(agent=0, start=2.0, token_times=[2.25, 2.5], output_tokens=2)
    assert record.ttft == 0.25
    assert record.ok
    assert record.content_chunks == 2
    assert inter_token_gaps(record) == [0.25]
    empty = RequestRecord(agent=0, start=2.0)
    assert empty.ttft is None and not empty.ok
    failed = RequestRecord(agent=0, start=2.0, token_times=[2.25], output_tokens=1, error="boom")
    assert not failed.ok


# --- round_figures --------------------------------------------------------------


def test_round_figures_counts_only_successful_tokens() -> None:
    """A request that streamed 100 tokens and then failed adds nothing to effective tok/s."""
    good = RequestRecord(agent=0, start=0.0, end=1.0, token_times=[0.1, 0.2], output_tokens=30)
    bad = RequestRecord(agent=1, start=0.0, end=1.0, token_times=[0.1], output_tokens=100, error="reset")
    empty = RequestRecord(agent=2, start=0.0, end=1.0, error="empty response: no tokens")
    figures = round_figures(RoundRecord(concurrency=3, wall_s=2.0, requests=[good, bad, empty]))
    assert figures.effective_tps == 15.0
    assert figures.output_tokens == 30
    assert figures.requests == 3
    assert figures.failures == 2
    assert figures.wall_s == 2.0


@given(round_records())
def test_round_figures_definition(round_: RoundRecord) -> None:
    """Effective tok/s = tokens of successful requests / wall-clock of the round."""
    figures = round_figures(round_)
    ok_tokens = sum(r.output_tokens for r in round_.requests if r.error is None and r.output_tokens > 0)
    assert figures.output_tokens == ok_tokens
    assert figures.effective_tps == ok_tokens / round_.wall_s
    assert figures.requests == len(round_.requests)
    assert figures.failures == sum(1 for r in round_.requests if not (r.error is None and r.output_tokens > 0))


# --- summarize ------------------------------------------------------------------


def test_summarize_needs_a_round() -> None:
    with pytest.raises(ValueError, match="summarize needs at least one round"):
        summarize([])


@given(round_lists, st.one_of(st.none(), st.integers(1, 12)))
@settings(max_examples=100)
def test_summarize_definitions(rounds: list[RoundRecord], pinned: int | None) -> None:
    """Medians over rounds for whole-round figures, totals for counts, pooled distributions of successes."""
    result = summarize(rounds, pinned)
    records = [r for round_ in rounds for r in round_.requests]
    ok = [r for r in records if r.error is None and r.output_tokens > 0]
    failed = [r for r in records if not (r.error is None and r.output_tokens > 0)]

    effs = [sum(r.output_tokens for r in rd.requests if r.ok) / rd.wall_s for rd in rounds]
    assert result.effective_tps == statistics.median(effs)
    assert result.wall_s == statistics.median(rd.wall_s for rd in rounds)
    assert result.concurrency == rounds[0].concurrency
    assert len(result.rounds) == len(rounds)
    assert result.requests_per_round == len(records) / len(rounds)

    # Failures are counted, never dropped.
    assert result.requests == len(records)
    assert result.failures == len(failed)
    assert result.requests == len(ok) + result.failures
    assert sum(result.failure_causes.values()) == result.failures
    assert result.output_tokens == sum(r.output_tokens for r in ok)

    reported = [r.cached_prompt_tokens for r in ok if r.cached_prompt_tokens is not None]
    assert result.cached_prompt_tokens == (sum(reported) if reported else None)
    expected_short = sum(1 for r in ok if r.output_tokens < pinned) if pinned is not None else 0
    assert result.facets.answers.short_outputs == expected_short
    # One content chunk is at least one token: more chunks than the server counted is the only contradiction.
    assert result.facets.answers.token_count_mismatches == sum(
        1 for r in ok if r.usage_reported and len(r.token_times) > r.output_tokens
    )

    # Pooled distributions: every successful request of every round, and nothing else.
    assert result.e2e.n == len(ok)
    assert result.ttft.n == sum(1 for r in ok if r.token_times)
    assert result.itl.n == sum(max(len(r.token_times) - 1, 0) for r in ok)
    assert result.per_request_tps.n == sum(1 for r in ok if r.decode_tps is not None)
    if ok:
        assert close(result.e2e.p50, statistics.median(r.end - r.start for r in ok))
    assert (result.facets.sweep.contention, result.facets.sweep.speedup, result.facets.sweep.parallelism) == (
        None,
        None,
        None,
    )


def test_summarize_example() -> None:
    """Two rounds worked by hand: one clean, one with a failure and a short answer."""

    def req(tokens: int, start: float = 0.0, error: str | None = None, **kw: Any) -> RequestRecord:
        times = [start + 0.1 + 0.01 * i for i in range(tokens)]
        return RequestRecord(
            agent=0, start=start, end=start + 1.0, token_times=times, output_tokens=tokens, error=error, **kw
        )

    round1 = RoundRecord(concurrency=2, wall_s=1.0, requests=[req(10, cached_prompt_tokens=4), req(10)])
    round2 = RoundRecord(
        concurrency=2,
        wall_s=3.0,
        requests=[
            req(10, usage_reported=True),
            req(7, usage_reported=True),
            req(3, error="HTTP 503: busy\nretry later"),
        ],
    )
    # Usage reports fewer tokens than reads carried content: a token-count mismatch.
    round2.requests[1].output_tokens = 6
    result = summarize([round1, round2], pinned_tokens=10)
    assert result.effective_tps == statistics.median([20 / 1.0, 16 / 3.0])
    assert result.wall_s == 2.0
    assert (result.requests, result.failures, result.output_tokens) == (5, 1, 36)
    assert result.cached_prompt_tokens == 4
    assert result.facets.answers.short_outputs == 1
    assert result.facets.answers.token_count_mismatches == 1
    assert result.failure_causes == {"HTTP 503: busy": 1}
    assert result.ttft.p50 == pytest.approx(0.1)
    assert result.itl.p50 == pytest.approx(0.01)


def test_summarize_no_cached_tokens_reported_is_none() -> None:
    """A server that does not report cached tokens shows None, not 0 (which would claim a cold prefill)."""
    record = RequestRecord(agent=0, start=0.0, end=1.0, token_times=[0.5], output_tokens=1)
    assert summarize([RoundRecord(concurrency=1, wall_s=1.0, requests=[record])]).cached_prompt_tokens is None
    record.cached_prompt_tokens = 0
    assert summarize([RoundRecord(concurrency=1, wall_s=1.0, requests=[record])]).cached_prompt_tokens == 0


def test_summarize_all_failed() -> None:
    """A round where every request failed: zero throughput, empty distributions, every failure counted and grouped."""
    failures = [
        RequestRecord(agent=i, start=0.0, end=1.0, error=error)
        for i, error in enumerate(["timeout", "timeout", "x" * 300, "first\nsecond", None])
    ]
    result = summarize([RoundRecord(concurrency=5, wall_s=2.0, requests=failures)], pinned_tokens=16)
    assert result.effective_tps == 0.0
    assert (result.requests, result.failures, result.output_tokens) == (5, 5, 0)
    assert result.per_request_tps.n == result.ttft.n == result.e2e.n == 0
    assert result.per_request_tps.median is None
    assert result.facets.answers.short_outputs == 0  # failures are failures, not short answers
    assert result.failure_causes == {"timeout": 2, "x" * 159 + "…": 1, "first": 1, "empty response": 1}
    assert next(iter(result.failure_causes)) == "timeout", "the most frequent kind first"


def test_figures_are_json_ready() -> None:
    """`figures()` nests distributions as dicts and rounds as a list of dicts under their DESIGN names."""
    record = RequestRecord(agent=0, start=0.0, end=1.0, token_times=[0.5, 0.75], output_tokens=2)
    figures = summarize([RoundRecord(concurrency=1, wall_s=1.0, requests=[record])]).figures()
    assert figures["per_request_tps"]["median"] == 4.0
    (round_,) = figures["rounds"]
    assert {k: round_[k] for k in ("wall_s", "effective_tps", "requests", "failures", "output_tokens", "boot")} == {
        "wall_s": 1.0,
        "effective_tps": 2.0,
        "requests": 1,
        "failures": 0,
        "output_tokens": 2,
        "boot": 0,
    }
    assert round_["figures"]["per_request_tps.median"] == 4.0 and round_["figures"]["ttft.p95"] == 0.5
    assert figures["effective_tps"] == 2.0


# --- relative_to ----------------------------------------------------------------


def expected_speedup(result: ItemFigures, reference: ItemFigures) -> float | None:
    ref_rpr = reference.requests / len(reference.rounds)
    if ref_rpr == 0 or result.wall_s == 0:
        return None
    return (reference.wall_s / ref_rpr) * (result.requests / len(result.rounds)) / result.wall_s


@given(round_lists, round_lists)
@settings(max_examples=100)
def test_relative_to_definitions(rounds: list[RoundRecord], reference_rounds: list[RoundRecord]) -> None:
    """`contention = 1 - med/med_ref`, `parallelism = eff/eff_ref`, `speedup = serial time / concurrent time`."""
    result = summarize(rounds)
    reference = summarize(reference_rounds)
    relative = relative_to(result, reference)

    med, med_ref = result.per_request_tps.median, reference.per_request_tps.median
    if med is None or not med_ref:
        assert relative.facets.sweep.contention is None
    else:
        assert relative.facets.sweep.contention == 1.0 - med / med_ref

    if reference.effective_tps == 0:
        assert relative.facets.sweep.parallelism is None
    else:
        assert relative.facets.sweep.parallelism == result.effective_tps / reference.effective_tps

    assert close(relative.facets.sweep.number("speedup"), expected_speedup(result, reference))
    # Nothing else moves.
    assert relative.figures() | {"contention": None, "speedup": None, "parallelism": None} == result.figures()


def test_relative_to_example() -> None:
    """C=1: 1 request per round in 2 s; C=4: 4 requests per round in 4 s, each decoding at half speed."""

    def req(gap: float, n: int = 11) -> RequestRecord:
        return RequestRecord(
            agent=0, start=0.0, end=1.0, token_times=[0.1 + gap * i for i in range(n)], output_tokens=n
        )

    reference = summarize([RoundRecord(concurrency=1, wall_s=2.0, requests=[req(0.1)])])
    result = summarize([RoundRecord(concurrency=4, wall_s=4.0, requests=[req(0.2) for _ in range(4)])])
    relative = relative_to(result, reference)
    assert relative.facets.sweep.contention == pytest.approx(0.5)
    assert relative.facets.sweep.speedup == pytest.approx(2.0)  # 4 x 2 s serial over 4 s
    assert relative.facets.sweep.parallelism == pytest.approx((44 / 4.0) / (11 / 2.0))


@given(round_lists)
def test_relative_to_itself_and_then_to_none(rounds: list[RoundRecord]) -> None:
    """A result against itself: no contention, parallelism 1, speedup 1 (same requests per round). Then without a C=1
    result the relative figures are unknown (None), though they were set before."""
    result = summarize(rounds)
    relative = relative_to(result, result)
    if result.per_request_tps.median:
        assert relative.facets.sweep.contention == 0.0
    else:
        assert relative.facets.sweep.contention is None
    if result.effective_tps:
        assert relative.facets.sweep.parallelism == 1.0
    else:
        assert relative.facets.sweep.parallelism is None
    if result.requests:
        assert relative.facets.sweep.speedup is not None and math.isclose(
            relative.facets.sweep.number("speedup") or 0.0, 1.0, rel_tol=1e-12
        )
    else:
        assert relative.facets.sweep.speedup is None
    cleared = relative_to(relative, None)
    assert (cleared.facets.sweep.contention, cleared.facets.sweep.speedup, cleared.facets.sweep.parallelism) == (
        None,
        None,
        None,
    )
