"""What the server did, as the peers' reports say it: requests and all tokens a second; and the share of a speculative
decoder's drafted tokens the model kept, per request where the server's `timings` count them (llama.cpp), else from
its /metrics counters (vLLM), none where nothing was drafted."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm.core.records import RequestRecord, RoundRecord, ServerClock
from pytest_swarm.figures.server import draft_acceptance, request_rate, total_tps


def _request(drafted: int | None, accepted: int | None, error: str | None = None) -> RequestRecord:
    clock = ServerClock(engine="llamacpp", decode_s=0.1, drafted_n=drafted, accepted_n=accepted)
    return RequestRecord(
        agent=0, start=0.0, end=1.0, output_tokens=8, token_times=[0.5], error=error, server_clock=clock
    )


def _round(*requests: RequestRecord, state: dict[str, float] | None = None) -> RoundRecord:
    return RoundRecord(concurrency=1, wall_s=1.0, requests=list(requests), server_state=state)


def test_accepted_of_drafted_is_summed_over_requests_not_averaged_per_request() -> None:
    """16 of 20 and 0 of 4: 16 of 24 kept, two thirds (the mean of the two shares, 0.4, would weigh a short draft like
    a long one)."""
    assert draft_acceptance([_round(_request(20, 16)), _round(_request(4, 0))]) == 16 / 24


def test_failed_requests_and_counts_that_contradict_themselves_are_left_out() -> None:
    rounds = [_round(_request(10, 5), _request(10, 10, error="HTTP 500"), _request(10, 11))]
    assert draft_acceptance(rounds) == 0.5


def test_no_draft_is_no_figure_not_zero() -> None:
    assert draft_acceptance([_round(_request(None, None))]) is None
    assert draft_acceptance([_round(_request(0, 0))]) is None
    assert draft_acceptance([]) is None


def test_without_per_request_counts_the_servers_counters_decide() -> None:
    """Without a draft count per request (vLLM's case), the /metrics counters over each round decide
    (telemetry/server_metrics.py)."""
    rounds = [
        _round(_request(None, None), state={"spec_drafted": 30.0, "spec_accepted": 12.0}),
        _round(_request(None, None), state={"spec_drafted": 10.0, "spec_accepted": 8.0}),
    ]
    assert draft_acceptance(rounds) == 0.5
    assert draft_acceptance([_round(state={"spec_drafted": 10.0, "spec_accepted": 12.0})]) is None


@given(st.lists(st.tuples(st.integers(1, 64), st.integers(0, 64)).map(lambda t: (t[0], min(t))), min_size=1))
def test_the_share_lies_between_the_requests_least_and_most(pairs: list[tuple[int, int]]) -> None:
    share = draft_acceptance([_round(*(_request(d, a) for d, a in pairs))])
    assert share is not None
    assert min(a / d for d, a in pairs) - 1e-12 <= share <= max(a / d for d, a in pairs) + 1e-12


def test_requests_and_all_tokens_a_second_count_the_successful_requests_over_the_rounds_wall_clock() -> None:
    """Three requests in 2 s, one failed: 1 request a second; their 8-token answers to 100-token prompts, 108 tokens
    a second. A prompt the server did not count leaves the total unknown, not smaller."""
    ok = [
        RequestRecord(agent=i, start=0.0, end=2.0, output_tokens=8, token_times=[1.0], prompt_tokens=100)
        for i in (0, 1)
    ]
    failed = RequestRecord(agent=2, start=0.0, end=1.0, error="HTTP 500", prompt_tokens=100)
    round_ = RoundRecord(concurrency=3, wall_s=2.0, requests=[*ok, failed])
    assert request_rate(round_) == 1.0 and total_tps(round_) == 108.0
    ok[0].prompt_tokens = None
    assert total_tps(round_) is None and request_rate(round_) == 1.0
    assert request_rate(RoundRecord(concurrency=1, wall_s=0.0, requests=[])) is None
