"""One request's time split into the server's parts and the rest (figures/components.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm.client import Endpoint
from pytest_swarm.core.records import RequestRecord, ServerClock
from pytest_swarm.figures.components import (
    NO_CLOCK,
    component_distributions,
    split_request,
    split_round,
    split_round_from_histograms,
)
from pytest_swarm.load.planner import RoundPlanner
from pytest_swarm.load.prompts import ColdPrompts
from pytest_swarm.load.rounds import run_load
from pytest_swarm.specs import Load, Workload
from tests.standins import clock_standin

seconds = st.floats(min_value=0.0, max_value=5.0, allow_nan=False)


def _record(e2e: float, ttft: float, clock: ServerClock | None) -> RequestRecord:
    return RequestRecord(
        agent=0,
        start=10.0,
        end=10.0 + e2e,
        token_times=[10.0 + ttft, 10.0 + e2e],
        output_tokens=2,
        server_clock=clock,
    )


@given(queue=seconds, prefill=seconds, decode=seconds, before=seconds, after=seconds, vllm=st.booleans())
def test_parts_and_remainder_add_up_to_the_clients_span(
    queue: float, prefill: float, decode: float, before: float, after: float, vllm: bool
) -> None:
    """A server whose parts fit in what the client saw: the parts plus the remainder are the client's end to end,
    and the remainder is "client" only where the engine timed queue, prefill and decode."""
    ttft = before + queue + prefill
    e2e = ttft + decode + after
    if not e2e > ttft + 1e-6:  # a span the client's clock (10 s + e2e) can tell from nothing
        return
    clock = (
        ServerClock(engine="vllm", queue_s=queue, prefill_s=prefill, decode_s=decode)
        if vllm
        else ServerClock(engine="llamacpp", prefill_s=prefill, decode_s=decode)
    )
    split = split_request(_record(e2e, ttft, clock))
    assert split is not None and split.contradiction is None
    assert sum(s for _, s in split.parts) == pytest.approx(e2e, abs=1e-9)
    assert [name for name, _ in split.parts][-1] == ("client" if vllm else "unaccounted")
    assert split.part("queue") == (queue if vllm else None), "llama.cpp's slot wait is never guessed into queue"
    first = split_request(_record(e2e, ttft, clock), upto="first token")
    assert first is not None and sum(s for _, s in first.parts) == pytest.approx(ttft, abs=1e-9)
    assert first.part("decode") is None


def test_a_server_prefill_longer_than_the_clients_ttft_is_a_contradiction_left_out_of_the_means() -> None:
    fits = _record(1.0, 0.3, ServerClock(engine="llamacpp", prefill_s=0.2, decode_s=0.6))
    contradicts = _record(1.0, 0.3, ServerClock(engine="llamacpp", prefill_s=0.52, decode_s=0.4))
    bad = split_request(contradicts)
    assert bad is not None and bad.parts == ()
    assert bad.contradiction == "the server's prefill (0.520 s) is longer than the client's TTFT (0.300 s)"
    round_ = split_round([fits, contradicts])
    assert round_.requests == 1 and round_.contradictions == 1 and round_.contradiction == bad.contradiction
    assert dict(round_.means) == pytest.approx({"prefill": 0.2, "decode": 0.6, "unaccounted": 0.2})
    too_long = split_request(_record(1.0, 0.3, ServerClock(engine="llamacpp", prefill_s=0.25, decode_s=0.9)))
    assert too_long is not None and "longer than the client's end to end" in (too_long.contradiction or "")


def test_within_the_clock_tolerance_a_part_a_hair_too_long_still_fits() -> None:
    split = split_request(_record(1.0, 0.3, ServerClock(engine="llamacpp", prefill_s=0.301, decode_s=0.7)))
    assert split is not None and split.contradiction is None and split.part("unaccounted") == 0.0


def test_failed_requests_and_requests_without_a_clock_are_not_split() -> None:
    assert split_request(_record(1.0, 0.3, None)) is None
    failed = _record(1.0, 0.3, ServerClock(engine="vllm", queue_s=0.1))
    failed.error = "server error: boom"
    assert split_request(failed) is None
    assert split_round([failed]) is NO_CLOCK


@given(st.lists(st.tuples(seconds, seconds, seconds, seconds), min_size=1, max_size=20))
def test_a_rounds_component_means_sum_to_its_mean_span(rows: list[tuple[float, float, float, float]]) -> None:
    records = [
        _record(
            q + p + d + rest + 0.001, q + p + 0.0005, ServerClock(engine="vllm", queue_s=q, prefill_s=p, decode_s=d)
        )
        for q, p, d, rest in rows
    ]
    round_ = split_round(records)
    assert round_.span_s is not None and round_.requests == len(rows)
    assert sum(s for _, s in round_.means) == pytest.approx(round_.span_s)
    dists = component_distributions([s for r in records if (s := split_request(r)) is not None])
    assert list(dists) == ["queue", "prefill", "decode", "client"] and all(d.n == len(rows) for d in dists.values())


def test_a_round_split_from_histograms_is_sums_over_counts_and_the_rest_against_the_clients_mean() -> None:
    records = [_record(1.0, 0.4, None), _record(2.0, 0.6, None)]
    histograms = {"queue": (0.2, 2.0), "prefill": (0.6, 2.0), "decode": (2.0, 2.0)}
    round_ = split_round_from_histograms(records, histograms)
    assert round_.source == "/metrics" and round_.span_s == 1.5
    assert dict(round_.means) == pytest.approx({"queue": 0.1, "prefill": 0.3, "decode": 1.0, "client": 0.1})
    partial = split_round_from_histograms(records, {"queue": (0.2, 2.0), "decode": (0.0, 0.0)})
    assert dict(partial.means) == pytest.approx({"queue": 0.1, "unaccounted": 1.4}), "a count of 0 is no histogram"
    contradicts = split_round_from_histograms(records, {"decode": (8.0, 2.0)})
    assert contradicts.means == () and contradicts.contradictions == 2 and contradicts.contradiction
    assert split_round_from_histograms(records, {}) is NO_CLOCK


def test_histogram_counts_the_round_cannot_account_for_refuse_the_split_saying_why() -> None:
    """Two requests sent and finished, five counted: another client's requests (or one left from the round before) are
    in the means, so they are not used; a count between the finished and the sent (a request cut at a deadline the
    server still counted) is this round's."""
    records = [_record(1.0, 0.4, None), _record(2.0, 0.6, None)]
    shared = split_round_from_histograms(records, {"queue": (0.5, 5.0), "prefill": (1.5, 5.0), "decode": (5.0, 5.0)})
    assert shared.means == () and shared.contradictions == 2
    assert shared.contradiction is not None and "counted 5 requests over the round, which sent 2 and finished 2" in (
        shared.contradiction
    )
    cut = [*records, RequestRecord(agent=2, start=0.0, end=0.5, error="deadline")]
    counted = split_round_from_histograms(cut, {"queue": (0.3, 3.0), "decode": (3.0, 3.0)})
    assert dict(counted.means).keys() == {"queue", "decode", "unaccounted"}


@pytest.mark.quiet  # the client's own lag is part of what is left: it times the event loop
@pytest.mark.parametrize("standin", ["llamacpp", "vllm"])
def test_against_the_standins_the_server_parts_sum_to_the_clients_end_to_end_within_5_percent(standin: str) -> None:
    """Where the server reports per request, what it reports covers the client's end to end within 5% a request (4
    agents on 4 slots: no wait for a slot, which llama.cpp would not time), plus what the client's own event loop
    measured it lost over the round. The stand-in runs in a thread of this process, so a stall of the process (a
    busy neighbour, a collection) lands in what no clock explains: 12.0% of a 0.39 s request, all four of a
    round's first requests at once, was seen in a whole-suite run beside other work. The lag allowance is what the
    round measured, not a figure fitted to a machine; a server part left out of the sum (the 40 ms prefill, a tenth
    of a request) still fails it where the loop ran on time."""
    with clock_standin.serve(clock_standin.Config(standin, clock_standin.Causes(slots=4))) as url:
        workload = Workload(max_tokens=64, prompts_per_agent=2)
        load = Load(concurrency=4, rounds=1, warmup=False)
        planner = RoundPlanner(workload, load, (" ".join(["lorem"] * 200),), ColdPrompts(), 1)
        (round_,), _ = run_load([Endpoint(url, clock_standin.MODEL)], workload, load, planner)
    splits = [split_request(r) for r in round_.requests]
    assert len(splits) == 8 and all(s is not None and s.contradiction is None for s in splits)
    rest = "client" if standin == "vllm" else "unaccounted"
    lag_s = round_.conditions.client_lag_p99_s
    assert lag_s is not None
    left = [(s.part(rest) or 0.0, s.span_s) for s in splits if s is not None]
    assert all(part < 0.05 * span + lag_s for part, span in left), (
        f"the server's parts left {max(part / span for part, span in left):.1%} of a request unexplained, "
        f"with the client's event loop {lag_s * 1e3:.1f} ms late at p99"
    )
