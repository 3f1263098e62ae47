"""Each engine's own clock, read from the chunk that ends a request (client/server_clock.py)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm.client.ollama import _on_line
from pytest_swarm.client.openai import SSEReader
from pytest_swarm.client.server_clock import llamacpp_clock, ollama_clock, vllm_clock
from pytest_swarm.core.records import RequestRecord, ServerClock

LLAMACPP_TIMINGS = {
    "cache_n": 1,
    "prompt_n": 2,
    "prompt_ms": 20.94,
    "prompt_per_token_ms": 10.47,
    "prompt_per_second": 95.51098376313276,
    "predicted_n": 3,
    "predicted_ms": 36.147,
    "predicted_per_token_ms": 18.0735,
    "predicted_per_second": 55.329626248374694,
}
"""The usage chunk's `timings` of the embedded xllamacpp server (2026.10.11549), as it sent them to curl."""


def test_llamacpp_timings_give_prefill_and_decode_and_no_queue() -> None:
    clock = llamacpp_clock(LLAMACPP_TIMINGS)
    assert clock is not None and clock.queue_s is None
    assert (clock.prefill_s, clock.decode_s) == pytest.approx((0.02094, 0.036147))
    assert (clock.prompt_n, clock.cache_n, clock.decoded_n) == (2, 1, 3)
    assert llamacpp_clock({"cache_n": 0}) is None


def test_llamacpp_timings_of_a_speculative_decode_carry_what_was_drafted_and_kept() -> None:
    """`draft_n` and `draft_n_accepted` are in `timings` only where the server drafted: None otherwise, never 0."""
    clock = llamacpp_clock({**LLAMACPP_TIMINGS, "draft_n": 16, "draft_n_accepted": 14})
    assert clock is not None and (clock.drafted_n, clock.accepted_n) == (16, 14)
    plain = llamacpp_clock(LLAMACPP_TIMINGS)
    assert plain is not None and (plain.drafted_n, plain.accepted_n) == (None, None)


def test_vllm_metrics_give_queue_prefill_and_decode_and_a_missing_field_stays_missing() -> None:
    clock = vllm_clock(12.5, 40.0, 300.0, cached=16)
    assert clock == ServerClock(engine="vllm", queue_s=0.0125, prefill_s=0.04, decode_s=0.3, cache_n=16)
    assert vllm_clock(None, 40.0, None) == ServerClock(engine="vllm", prefill_s=0.04)
    assert vllm_clock(None, None, None) is None


def test_ollama_durations_are_nanoseconds() -> None:
    clock = ollama_clock({"load_duration": 1_000_000, "prompt_eval_duration": 50_000_000, "eval_duration": 2 * 10**8})
    assert clock == ServerClock(engine="ollama", load_s=0.001, prefill_s=0.05, decode_s=0.2)
    assert ollama_clock({"eval_count": 3}) is None


@given(st.one_of(st.just(-1.0), st.just(math.nan), st.just(math.inf), st.booleans(), st.text(max_size=3)))
def test_a_value_that_is_not_a_finite_non_negative_number_is_dropped_not_trusted(bad: object) -> None:
    assert vllm_clock(bad, 40.0, 300.0) == ServerClock(engine="vllm", prefill_s=0.04, decode_s=0.3)  # type: ignore[arg-type]
    assert llamacpp_clock({"prompt_ms": bad, "predicted_ms": 5.0}) == ServerClock(engine="llamacpp", decode_s=0.005)


def _stream(*events: Mapping[str, Any]) -> RequestRecord:
    record = RequestRecord(agent=0, start=0.0)
    reader = SSEReader(record)
    for i, event in enumerate(events):
        assert reader.feed(b"data: " + orjson.dumps(event) + b"\n\n", float(i + 1))
    assert reader.feed(b"data: [DONE]\n\n", float(len(events) + 1))
    reader.finish()
    return record


TOKEN: dict[str, Any] = {"choices": [{"index": 0, "text": " a", "finish_reason": None}]}


def test_the_openai_reader_takes_vllms_metrics_from_the_usage_chunk() -> None:
    usage: dict[str, Any] = {
        "choices": [],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 4}},
        "metrics": {"queue_time_ms": 3.0, "time_to_first_token_ms": 8.0, "generation_time_ms": 20.0, "mean_itl_ms": 20},
    }
    record = _stream(TOKEN, TOKEN, usage)
    assert record.server_clock == ServerClock(engine="vllm", queue_s=0.003, prefill_s=0.008, decode_s=0.02, cache_n=4)


def test_the_openai_reader_takes_llamacpps_timings_from_the_usage_chunk() -> None:
    usage: dict[str, Any] = {
        "choices": [],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
        "timings": LLAMACPP_TIMINGS,
    }
    record = _stream(TOKEN, TOKEN, usage)
    assert record.server_clock == llamacpp_clock(LLAMACPP_TIMINGS) and record.server_timings == LLAMACPP_TIMINGS


def test_timings_on_the_finish_chunk_and_usage_on_a_chunk_of_its_own_give_the_same_clock() -> None:
    """Where a llama.cpp build puts `timings` on the chunk that finishes the answer, before a usage chunk of its own,
    the clock is read as where both come together; the later usage chunk does not drop it."""
    usage: dict[str, Any] = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
    finish = {"choices": [{"index": 0, "text": "", "finish_reason": "length"}], "timings": LLAMACPP_TIMINGS}
    apart = _stream(TOKEN, TOKEN, finish, usage)
    together = _stream(TOKEN, TOKEN, {**usage, "timings": LLAMACPP_TIMINGS})
    assert apart.server_clock == together.server_clock == llamacpp_clock(LLAMACPP_TIMINGS)
    assert apart.server_timings == together.server_timings == LLAMACPP_TIMINGS
    assert apart.output_tokens == together.output_tokens == 2 and apart.finish_reason == "length"


def test_a_server_that_says_nothing_of_its_clock_leaves_none() -> None:
    assert _stream(TOKEN, {"choices": [], "usage": {"completion_tokens": 1}}).server_clock is None
    assert _stream(TOKEN).server_clock is None, "no usage chunk at all"


def test_a_metrics_field_of_the_wrong_type_is_a_malformed_event_named_by_its_path() -> None:
    record = RequestRecord(agent=0, start=0.0)
    bad = {"choices": [], "usage": {"completion_tokens": 1}, "metrics": {"queue_time_ms": "soon"}}
    assert not SSEReader(record).feed(b"data: " + orjson.dumps(bad) + b"\n\n", 1.0)
    assert record.error is not None and "$.metrics.queue_time_ms" in record.error


def test_ollamas_final_object_gives_its_clock() -> None:
    record = RequestRecord(agent=0, start=0.0)
    final = {
        "response": "",
        "done": True,
        "done_reason": "stop",
        "eval_count": 2,
        "eval_duration": 10**8,
        "prompt_eval_duration": 5 * 10**7,
        "load_duration": 10**6,
    }
    assert _on_line(orjson.dumps(final), 1.0, record) is True
    assert record.server_clock == ServerClock(engine="ollama", load_s=0.001, prefill_s=0.05, decode_s=0.1, decoded_n=2)
