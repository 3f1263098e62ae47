"""The streaming client against a protocol-faithful stand-in: figures and every failure counted."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_swarm.client import Endpoint
from pytest_swarm.core.records import RequestRecord
from pytest_swarm.figures.summary import summarize
from pytest_swarm.load.rounds import run_load
from pytest_swarm.specs import Load, Workload
from tests.factories import TakePlanner
from tests.standins import openai_standin


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with openai_standin.serve() as url:
        yield url


def _run(base_url: str, faults: list[str], timeout_s: float = 5.0) -> list[RequestRecord]:
    """One round with one agent per fault; prompts carry the fault after the nonce."""
    counter = iter(range(10**6))

    def take(n: int) -> list[str]:
        return [f"[req {next(counter)}] {faults[i % len(faults)]}" for i in range(n)]

    load = Load(concurrency=len(faults), rounds=1, warmup=False, request_timeout_s=timeout_s)
    (round_,), memory = run_load(
        [Endpoint(base_url, "standin")], Workload(max_tokens=openai_standin.TOKENS), load, TakePlanner(take, load)
    )
    assert memory is None, "no telemetry was asked for"
    return sorted(round_.requests, key=lambda r: r.agent)


def test_a_good_stream_yields_tokens_timestamps_and_usage(base_url: str) -> None:
    (record,) = _run(base_url, ["ok"])
    assert record.error is None
    assert record.output_tokens == openai_standin.TOKENS
    assert record.content_chunks == openai_standin.TOKENS
    assert record.cached_prompt_tokens == 0
    assert record.prompt_tokens == 4, "a BOS, then a token a word of '[req 0] ok'"
    assert record.finish_reason == "length"
    assert record.ttft is not None and 0 < record.ttft < record.end - record.start
    assert record.decode_tps is not None and record.decode_tps > 0


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        ("http500", 'HTTP 500: {"error": {"message": "out of memory"'),
        ("html", "not a stream (content type 'text/html'): <html>proxy error"),
        ("badjson", "malformed event: {not json"),
        ("error_event", 'server error: {"message":"slot crashed"'),
        ("no_done", "stream ended without [DONE]"),
        ("truncated", 'stream ended without [DONE]; unterminated event: data: {"choices": [{"te'),
    ],
)
def test_each_fault_is_a_failure_with_the_servers_own_words(base_url: str, fault: str, words: str) -> None:
    (record,) = _run(base_url, [fault])
    assert not record.ok
    assert record.error is not None and record.error.startswith(words)


def test_a_hung_server_times_out_and_counts_as_a_failure(base_url: str) -> None:
    (record,) = _run(base_url, ["hang"], timeout_s=0.5)
    assert record.error == "timeout after 0.5 s"
    assert record.end - record.start < 2.0


def test_a_stream_that_stalls_midway_times_out_and_keeps_its_tokens(base_url: str) -> None:
    (record,) = _run(base_url, ["stall"], timeout_s=0.5)
    assert record.error == "timeout after 0.5 s"
    assert record.content_chunks == 2, "the tokens that did arrive are still on the record"
    assert not record.ok


def test_failures_are_counted_never_dropped(base_url: str) -> None:
    faults = ["ok", "http500", "ok", "no_done", "cached", "miscount"]
    records = _run(base_url, faults)
    from pytest_swarm.core.records import RoundRecord

    result = summarize(
        [RoundRecord(concurrency=len(faults), wall_s=1.0, requests=records)], pinned_tokens=openai_standin.TOKENS
    )
    assert result.requests == 6
    assert result.failures == 2
    assert set(result.failure_causes) == {
        'HTTP 500: {"error": {"message": "out of memory", "code": 500}}',
        "stream ended without [DONE]",
    }
    assert result.cached_prompt_tokens == 4
    assert result.facets.answers.token_count_mismatches == 1
