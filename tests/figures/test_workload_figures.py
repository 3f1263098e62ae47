"""Per-token latencies that stay right when a chunk carries several tokens, goodput, the schedule kept, turns and sessions."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm.core.limits import Limit
from pytest_swarm.core.records import AnswerParts, RequestRecord, RoundConditions, RoundRecord, Schedule
from pytest_swarm.figures.checks import cache_problem, schedule_problem, token_problem
from pytest_swarm.figures.requests import inter_token_gaps, meets, schedule_figures, token_count_disagrees
from pytest_swarm.figures.summary import summarize
from pytest_swarm.specs import OpenLoop, Workload

gaps = st.lists(st.floats(min_value=0.001, max_value=1.0), min_size=1, max_size=30)


def _record(gap_list: list[float], tokens: int, counts: list[int] | None = None, **kw: Any) -> RequestRecord:
    times = [0.5]
    for g in gap_list:
        times.append(times[-1] + g)
    return RequestRecord(
        0,
        0.0,
        end=times[-1],
        token_times=times,
        output_tokens=tokens,
        usage_reported=True,
        parts=AnswerParts(chunk_tokens=counts),
        **kw,
    )


@given(gap_list=gaps, extra=st.integers(0, 40))
def test_itl_spreads_the_server_tokens_over_the_chunks_so_it_agrees_with_tpot(
    gap_list: list[float], extra: int
) -> None:
    """Tokens arriving in fewer chunks: the per-token gaps sum to the decode span over the tokens after the first, as TPOT."""
    tokens = len(gap_list) + 1 + extra
    record = _record(gap_list, tokens)
    itl = inter_token_gaps(record)
    assert len(itl) == len(gap_list)
    assert math.isclose(sum(itl) / len(itl), record.tpot or 0.0, rel_tol=1e-9)
    assert not token_count_disagrees(record)


@given(counts=st.lists(st.integers(1, 5), min_size=2, max_size=20))
def test_a_chunk_that_says_it_carries_k_tokens_counts_k_gaps(counts: list[int]) -> None:
    record = _record([0.1] * (len(counts) - 1), sum(counts), counts)
    itl = inter_token_gaps(record)
    assert len(itl) == sum(counts[1:])
    assert math.isclose(sum(itl), 0.1 * (len(counts) - 1), rel_tol=1e-9)
    assert not token_count_disagrees(record)
    record.output_tokens += 1
    assert token_count_disagrees(record), "token_ids that do not add up to usage contradict it"


def test_more_chunks_than_tokens_is_a_disagreement_and_fails_the_item() -> None:
    record = _record([0.1, 0.1, 0.1], 2)
    assert token_count_disagrees(record)
    result = summarize([RoundRecord(concurrency=1, wall_s=1.0, requests=[record])])
    assert result.facets.answers.token_count_mismatches == 1
    assert "contradict the server's token count" in (token_problem(result) or "")


def test_goodput_counts_requests_meeting_every_slo_per_second_and_their_share() -> None:
    fast = RequestRecord(0, 0.0, end=1.0, token_times=[0.2, 0.3, 0.4], output_tokens=3)
    slow = RequestRecord(1, 0.0, end=3.0, token_times=[2.5, 2.6, 2.7], output_tokens=3)
    failed = RequestRecord(2, 0.0, end=1.0, error="HTTP 500")
    slos = [("ttft", Limit("<", 1.0)), ("tpot", Limit("<", 0.2))]
    assert meets(fast, slos) and not meets(slow, slos) and not meets(failed, slos)
    result = summarize([RoundRecord(concurrency=3, wall_s=4.0, requests=[fast, slow, failed])], goodput=slos)
    assert result.goodput == pytest.approx(1 / 4.0)
    assert result.goodput_share == pytest.approx(1 / 3)
    assert result.tpot.p50 == pytest.approx(0.1)
    assert summarize([RoundRecord(concurrency=3, wall_s=4.0, requests=[fast])]).goodput is None, (
        "no goodput= no goodput"
    )


@given(late=st.lists(st.floats(0.0, 0.05), min_size=3, max_size=50), rate=st.floats(0.5, 100.0))
def test_the_schedule_figures_come_from_due_and_sent_instants(late: list[float], rate: float) -> None:
    records = [RequestRecord(i, i / rate + x, schedule=Schedule(i / rate)) for i, x in enumerate(late)]
    figures = schedule_figures(records)
    assert figures["scheduled_rate"] == pytest.approx(rate)
    assert (
        figures["lateness_p99_s"] is not None and min(late) - 1e-9 <= figures["lateness_p99_s"] <= max(late) + 1e-9
    )  # start = due + late, rounded
    assert figures["held"] == 0


def test_a_session_held_back_by_max_in_flight_is_not_late_and_not_in_the_rate() -> None:
    records = [
        RequestRecord(0, 0.0, schedule=Schedule(0.0)),
        RequestRecord(1, 1.0, schedule=Schedule(1.0)),
        RequestRecord(2, 5.0, schedule=Schedule(2.0, 4.999)),
    ]
    figures = schedule_figures(records)
    assert figures["held"] == 1 and figures["achieved_rate"] == pytest.approx(1.0)
    assert (figures["lateness_p99_s"] or 0) < 0.01


def test_latencies_from_the_instant_due_count_the_wait_that_ttft_from_the_send_hides() -> None:
    """A request max_in_flight held 3 s answers its first token 0.2 s after its send: its user waited 3.2 s (vLLM #54101)."""
    on_time = RequestRecord(0, 0.0, end=0.5, token_times=[0.2, 0.3], output_tokens=2, schedule=Schedule(0.0))
    held = RequestRecord(1, 4.0, end=4.5, token_times=[4.2, 4.3], output_tokens=2, schedule=Schedule(1.0, 4.0))
    closed = RequestRecord(2, 0.0, end=0.5, token_times=[0.2, 0.3], output_tokens=2)
    assert (held.ttft, held.wait, held.ttft_from_due, held.e2e_from_due) == pytest.approx((0.2, 3.0, 3.2, 3.5))
    assert (closed.wait, closed.ttft_from_due, closed.e2e_from_due) == (None, None, None), (
        "closed loop: nothing was due"
    )
    result = summarize([RoundRecord(concurrency=0, wall_s=5.0, requests=[on_time, held])])
    assert (
        result.ttft.p95 == pytest.approx(0.2)
        and (result.facets.open_loop.distribution("ttft_from_due").p95 or 0.0) > 3.0
    )
    open_loop = result.facets.open_loop
    wait, lateness = open_loop.distribution("wait").p99, open_loop.distribution("send_lateness").p99
    assert wait is not None and result.scalars()["wait.p99"] == pytest.approx(wait)
    assert wait > 2.9 and lateness is not None and lateness < 0.01, (
        "the hold is a wait its user saw, not the generator's lateness"
    )


def _open_round(late_s: float, stretch: float = 1.0) -> RoundRecord:
    requests = [
        RequestRecord(
            i,
            i * 0.1 * stretch + late_s,
            end=i * 0.1 + 1,
            token_times=[i * 0.1 + 0.5, i * 0.1 + 0.6],
            output_tokens=2,
            schedule=Schedule(i * 0.1),
        )
        for i in range(20)
    ]
    return RoundRecord(concurrency=0, wall_s=3.0, requests=requests)


def test_a_round_that_left_its_schedule_fails_the_item_saying_the_generator_was_the_limit() -> None:
    spec = OpenLoop(rate=10.0, requests=20, max_lateness_s=0.01)
    assert schedule_problem(summarize([_open_round(0.001)]), spec) is None
    late = schedule_problem(summarize([_open_round(0.05)]), spec)
    assert late is not None and "not the server" in late
    assert "round 1: send lateness p99 50.0 ms, at least 50.0 ms at 99% confidence, > 10 ms" in late
    slow = schedule_problem(
        summarize([_open_round(0.0, stretch=1.2)]), OpenLoop(rate=10.0, requests=20, max_lateness_s=0.3)
    )
    assert slow is not None and "sent 8.33 req/s where the schedule asked 10 (-16.7%)" in slow
    early = schedule_problem(
        summarize([_open_round(0.0, stretch=0.8)]), OpenLoop(rate=10.0, requests=20, max_lateness_s=0.3)
    )
    assert early is not None and "sent 12.5 req/s where the schedule asked 10 (+25.0%)" in early


def test_a_rate_off_by_no_more_than_one_sends_allowed_lateness_over_its_span_is_kept() -> None:
    """Three sends due 50 ms apart, the last 6 ms late: the rate over their span is 5.7% short, though no send was later
    than the 1 s the item allows one; 19 sends 17% slow over 1.9 s slipped 0.38 s, within the 10 s allowed."""
    short = RoundRecord(
        concurrency=0,
        wall_s=1.0,
        requests=[
            RequestRecord(i, i * 0.05 + (0.006 if i == 2 else 0.0), end=0.5, token_times=[0.3, 0.4], output_tokens=2,
                          schedule=Schedule(i * 0.05))
            for i in range(3)
        ],
    )  # fmt: skip
    (figures,) = summarize([short]).rounds
    assert figures.achieved_rate is not None and figures.scheduled_rate is not None
    assert figures.achieved_rate / figures.scheduled_rate - 1 < -0.05
    assert figures.span_slip_s == pytest.approx(0.006)
    assert schedule_problem(summarize([short]), OpenLoop(rate=20.0, requests=3, max_lateness_s=1.0)) is None
    assert schedule_problem(summarize([short]), OpenLoop(rate=20.0, requests=3, max_lateness_s=0.005)) is not None
    drifting = summarize([_open_round(0.0, stretch=1.2)])
    assert schedule_problem(drifting, OpenLoop(rate=10.0, requests=20, max_lateness_s=10.0)) is None


def test_one_send_a_stall_held_up_is_no_p99_in_a_short_round_but_three_are() -> None:
    """Of 20 sends, one late send makes the p99's point estimate; the p99 is past the limit at 99% confidence once
    three are, as P(Binomial(20, 0.99) >= 19) = 0.983 and P(>= 18) = 0.999."""
    spec = OpenLoop(rate=10.0, requests=20, max_lateness_s=0.01)
    one, three = _open_round(0.001), _open_round(0.001)
    for round_, stalled in ((one, 1), (three, 3)):
        for record in round_.requests[:stalled]:
            record.start += 0.015
    assert (summarize([one]).rounds[0].lateness_p99_s or 0.0) > 0.01, "the point estimate is past the limit"
    assert schedule_problem(summarize([one]), spec) is None
    problem = schedule_problem(summarize([three]), spec)
    assert problem is not None and "at least 16.0 ms at 99% confidence" in problem


@given(
    gaps=st.lists(st.floats(0.0, 0.5), min_size=1, max_size=40),
    late=st.data(),
    limit=st.floats(0.001, 2.0),
)
def test_sends_each_no_later_than_max_lateness_never_fail_the_schedule(
    gaps: list[float], late: Any, limit: float
) -> None:
    """Whatever the schedule and however short its span, a round whose every send left within `max_lateness` of its
    due instant kept its schedule: its rate may be far off over a short span, its span's slip cannot pass the limit."""
    dues = [sum(gaps[:i]) for i in range(len(gaps) + 1)]
    lateness = late.draw(st.lists(st.floats(0.0, limit * (1 - 1e-9)), min_size=len(dues), max_size=len(dues)))
    round_ = RoundRecord(
        concurrency=0,
        wall_s=dues[-1] + 2 * limit + 1.0,
        requests=[
            RequestRecord(i, due + lag, end=due + lag + 0.5, token_times=[due + lag + 0.1], output_tokens=1,
                          schedule=Schedule(due))
            for i, (due, lag) in enumerate(zip(dues, lateness, strict=True))
        ],
    )  # fmt: skip
    figures = summarize([round_])
    slip = figures.rounds[0].span_slip_s
    assert slip is None or abs(slip) <= limit
    assert schedule_problem(figures, OpenLoop(rate=1.0, requests=len(dues), max_lateness_s=limit)) is None


def _session_round(cached: list[int | None]) -> RoundRecord:
    """One session of len(cached) turns: prompts of 100, 150, 200 ... tokens, answers of 10."""
    records = [
        RequestRecord(
            0,
            t * 2.0,
            end=t * 2.0 + 1,
            token_times=[t * 2.0 + 0.5, t * 2.0 + 0.6],
            output_tokens=10,
            usage_reported=True,
            prompt_tokens=100 + 50 * t,
            cached_prompt_tokens=c,
            turn=t,
        )
        for t, c in enumerate(cached)
    ]
    return RoundRecord(concurrency=1, wall_s=8.0, requests=records)


def test_turns_report_what_earlier_turns_made_cacheable_and_sessions_their_wall() -> None:
    result = summarize([_session_round([0, 105, 155])])
    assert [t.turn for t in result.facets.per_turn] == [1, 2, 3]
    assert [t.cacheable_tokens for t in result.facets.per_turn] == [None, 110, 160], (
        "the previous turn's prompt and answer"
    )
    assert [t.cached_prompt_tokens for t in result.facets.per_turn] == [0, 105, 155]
    assert (
        result.facets.sessions is not None
        and result.facets.sessions.wall_s.p50 == pytest.approx(5.0)
        and result.facets.sessions.output_tokens.p50 == 30
    )
    assert cache_problem(result, Workload(turns=3, cache="warm")) is None


def test_a_warm_session_the_server_did_not_reuse_fails_with_the_numbers() -> None:
    problem = cache_problem(summarize([_session_round([0, 0, 20])]), Workload(turns=3, cache="warm"))
    assert (
        problem is not None
        and "reused 7% of what earlier turns made cacheable" in problem
        and "turn 2: 0 of 110" in problem
    )
    assert cache_problem(summarize([_session_round([None, None, None])]), Workload(turns=3, cache="warm")) is None, (
        "not reported: no claim"
    )


def test_a_cold_workload_the_cache_served_fails() -> None:
    assert cache_problem(summarize([_session_round([0, 0, 0])]), Workload(turns=3)) is None
    problem = cache_problem(summarize([_session_round([0, 105, 0])]), Workload(turns=3))
    assert problem is not None and "cache='cold', but the server served 105 prompt tokens" in problem


def test_a_block_cache_counts_what_is_cacheable_in_whole_blocks() -> None:
    """Since vLLM caches whole blocks only, 105 cached of 110 cacheable is all of the 64-token block there was; 0 of it is none."""
    result = summarize([_session_round([0, 64, 128])])
    assert cache_problem(result, Workload(turns=3, cache="warm"), block=64) is None
    missed = cache_problem(summarize([_session_round([0, 0, 0])]), Workload(turns=3, cache="warm"), block=64)
    assert missed is not None and "in whole 64-token blocks" in missed


def test_the_block_size_is_read_from_vllms_cache_config_info() -> None:
    from pytest_swarm.engines.vllm_served import cache_block

    page = (
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n# TYPE vllm:cache_config_info gauge\n"
        'vllm:cache_config_info{block_size="128",cache_dtype="auto",enable_prefix_caching="True"} 1.0\n'
    )
    assert cache_block(page) == 128
    assert cache_block("vllm:num_requests_running 0\n") is None and cache_block("not prometheus {") is None


def _behind(share: float, idle: float, server: float, other: float = 0.0, steal: float = 0.0) -> RoundRecord:
    return RoundRecord(
        concurrency=0,
        wall_s=3.0,
        requests=_open_round(0.0179).requests,
        conditions=RoundConditions(
            client_cpu_share=share, idle_cores=idle, server_cpu_cores=server, other_cpu_cores=other, steal_cores=steal
        ),
    )


def test_a_client_starved_by_the_server_is_told_apart_from_a_busy_one_and_pointed_at_cpus() -> None:
    """A 2-core Xeon seen: 17.9 ms late at 26% of a core while vLLM's threads held both cores."""
    spec = OpenLoop(rate=10.0, requests=20, max_lateness_s=0.01)
    starved = schedule_problem(summarize([_behind(0.26, idle=0.05, server=1.65, other=0.04)]), spec)
    assert starved is not None and "the client was starved, not busy (round 1: 26% of a core, 0.1 cores idle" in starved
    assert "cores held by the server's process tree (1.6)" in starved and "other processes" not in starved, (
        "0.04 is noise"
    )
    assert "cpus=" in starved and "generators=2" not in starved
    busy = schedule_problem(summarize([_behind(0.95, idle=0.9, server=0.1)]), spec)
    assert (
        busy is not None
        and "the client was busy, not starved (round 1: 95% of a core)" in busy
        and "generators=2" in busy
    )
    crowded = schedule_problem(summarize([_behind(0.2, idle=0.0, server=0.3, other=0.9, steal=0.6)]), spec)
    assert (
        crowded is not None
        and "held by other processes (0.9), steal (the hypervisor's other guests) (0.6), the server's process tree (0.3)"
        in crowded
    )
    assert "run where nothing else takes the cores" in crowded
    stalled = schedule_problem(summarize([_behind(0.2, idle=1.5, server=0.3)]), spec)
    assert stalled is not None and "starved" not in stalled and "busy" not in stalled and "generators=2" in stalled
