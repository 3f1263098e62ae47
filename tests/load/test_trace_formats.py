"""Traces as their owners publish them (Azure, BurstGPT, Bailian's sessions, Mooncake), and fitting one to a box."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm.load.trace import shared_tokens
from pytest_swarm.load.trace_fit import TEMPLATE_TOKENS, beyond_context, capped, scaled_lengths, window
from pytest_swarm.load.trace_formats import load_any_trace
from pytest_swarm.specs import SpecError, Trace, TraceRequest

EXAMPLE = Path(__file__).parents[2] / "examples" / "traces" / "agents_small.jsonl"


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_an_azure_csv_replays_at_its_times_with_prompts_that_share_nothing(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "azure.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n2023-11-16 18:15:51.0000000,1200,3\n",
    )
    trace = load_any_trace(path, block=512)
    assert [r.timestamp_ms for r in trace.requests] == pytest.approx([0.0, 4314.579, 4319.41])
    assert [(r.input_length, r.output_length) for r in trace.requests] == [(374, 44), (396, 109), (1200, 3)]
    assert [r.hash_ids for r in trace.requests] == [(0,), (1,), (2, 3, 4)]
    assert shared_tokens(trace) == [0, 0, 0], "a trace that records no prefixes is replayed cold"


def test_a_burstgpt_csv_leaves_out_the_requests_that_failed_in_production(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "burst.csv",
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,472,18,490,Conversation log\n45,ChatGPT,1087,0,1087,Conversation log\n118,GPT-4,417,276,693,API log\n",
    )
    trace = load_any_trace(path, block=512)
    assert [(r.timestamp_ms, r.input_length, r.output_length) for r in trace.requests] == [
        (0.0, 472, 18),
        (113000.0, 417, 276),
    ]


def test_a_bailian_session_trace_keeps_each_turns_parent(tmp_path: Path) -> None:
    lines = [
        {
            "chat_id": 0,
            "parent_chat_id": -1,
            "timestamp": 10.0,
            "input_length": 30,
            "output_length": 5,
            "type": "text",
            "turn": 1,
            "hash_ids": [1, 2],
        },
        {
            "chat_id": 1,
            "parent_chat_id": -1,
            "timestamp": 10.5,
            "input_length": 20,
            "output_length": 5,
            "type": "text",
            "turn": 1,
            "hash_ids": [3, 4],
        },
        {
            "chat_id": 2,
            "parent_chat_id": 0,
            "timestamp": 12.0,
            "input_length": 50,
            "output_length": 7,
            "type": "text",
            "turn": 2,
            "hash_ids": [1, 2, 5, 6],
        },
    ]
    path = _write(tmp_path / "sessions.jsonl", "\n".join(json.dumps(line) for line in lines) + "\n")
    trace = load_any_trace(path, block=16)
    assert [(r.chat_id, r.parent_id, r.timestamp_ms) for r in trace.requests] == [
        (0, None, 0.0),
        (1, None, 500.0),
        (2, 0, 2000.0),
    ]
    assert shared_tokens(trace) == [0, 0, 32], "the second turn shares its parent's two blocks"


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("cols.csv", "when,tokens\n1,2\n", r"cols\.csv:1: a trace CSV has Azure's columns"),
        (
            "time.csv",
            "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,1\n",
            r"time\.csv:2: TIMESTAMP must be a time",
        ),
        ("tok.csv", "Timestamp,Request tokens,Response tokens\n1,many,3\n", r"tok\.csv:2: a token count must be"),
        ("miss.jsonl", '{"chat_id": 0, "timestamp": 1}\n', r"miss\.jsonl:1: missing parent_chat_id"),
        (
            "orphan.jsonl",
            '{"chat_id": 3, "parent_chat_id": 9, "timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [1]}\n',
            r"chat 3's parent_chat_id 9 is not in the trace",
        ),
    ],
)
def test_a_malformed_trace_names_file_and_line(tmp_path: Path, name: str, text: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        load_any_trace(_write(tmp_path / name, text))


def test_a_mooncake_trace_is_still_read_by_the_same_entry() -> None:
    trace = load_any_trace(EXAMPLE, block=64)
    assert trace.requests and all(r.chat_id is None for r in trace.requests)


def _trace(n: int, block: int = 16) -> Trace:
    requests = tuple(
        TraceRequest(100.0 * k, 40 + k, 10 + k, (0, 1, 2, 100 + k)[: -(-(40 + k) // block)]) for k in range(n)
    )
    return Trace("t.jsonl", requests, 1.0, block)


def test_a_window_rebases_time_and_says_what_it_kept() -> None:
    fitted = window(_trace(10), start_s=0.25, end_s=0.75)
    assert [r.timestamp_ms for r in fitted.requests] == [0.0, 100.0, 200.0, 300.0, 400.0]
    assert fitted.fitted == ("window 0.25-0.75 s: 5 of 10 requests",)
    assert [r.timestamp_ms for r in window(_trace(10), first=3).requests] == [0.0, 100.0, 200.0]
    with pytest.raises(SpecError, match="no request in the window 5-6 s"):
        window(_trace(10), start_s=5, end_s=6)


@given(st.integers(1, 20), st.floats(0.05, 4.0))
def test_scaled_lengths_keep_every_prompt_covered_and_the_shared_share(n: int, factor: float) -> None:
    trace = _trace(n)
    fitted = scaled_lengths(trace, factor)
    for before, after in zip(trace.requests, fitted.requests, strict=True):
        assert after.hash_ids == before.hash_ids and len(after.hash_ids) * fitted.block >= after.input_length
        assert after.input_length == max(1, round(before.input_length * factor))
    assert fitted.fitted[-1].startswith(f"lengths x{factor:g} (block 16 -> ")


def test_caps_cut_prompts_at_their_leading_blocks_and_answers_at_the_cap() -> None:
    fitted = capped(_trace(5), max_input=20, max_output=12)
    assert all(r.input_length <= 20 and len(r.hash_ids) == 2 and r.output_length <= 12 for r in fitted.requests)
    assert fitted.fitted == ("prompts capped at 20 tokens: 5 cut", "answers capped at 12 tokens: 2 cut")


def test_requests_beyond_the_servers_context_are_named_by_their_line(tmp_path: Path) -> None:
    """The first 10 s of a production trace on a small model's context: refused before the round, not 400s in it."""
    path = _write(
        tmp_path / "azure.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,4000,200\n2023-11-16 18:15:51.0,900,600\n",
    )
    trace = load_any_trace(path, block=512)
    assert [r.source for r in trace.requests] == [f"{path}:2", f"{path}:3", f"{path}:4"]
    problem = beyond_context(trace, 1024, "llamacpp", "/props")
    assert problem is not None and problem.startswith(
        f"2 of 3 requests of {path} cannot fit llamacpp's context of 1024"
    )
    assert f"{path}:3: input 4000 + output 200 tokens; {path}:4: input 900 + output 600 tokens." in problem
    assert "The longest needs 4200: fit the trace with trace_max_input=" in problem
    assert beyond_context(capped(trace, max_input=500, max_output=400), 1024, "llamacpp", "/props") is None
    exactly = TraceRequest(0.0, 1024 - TEMPLATE_TOKENS - 8, 8, (0, 1))
    assert beyond_context(Trace("t", (exactly,), 1.0, 512), 1024, "s", "x") is None, "a request that just fits, fits"
