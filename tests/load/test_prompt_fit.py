"""A workload's prompts fitted to a booted server: dataset answer lengths in its tokens, and prompts that cannot fit its
context refused before the round, by file and line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm.client import Endpoint
from pytest_swarm.client.tokenize import count_tokens
from pytest_swarm.core.errors import RequestsBeyondContext, TokenizeFailed
from pytest_swarm.core.records import ServerInfo
from pytest_swarm.load.planner import RoundPlanner
from pytest_swarm.load.prompt_fit import answer_lengths, conversation_needs, fit_prompts
from pytest_swarm.load.prompts import ColdPrompts
from pytest_swarm.load.rounds import run_load
from pytest_swarm.load.trace_fit import TEMPLATE_TOKENS
from pytest_swarm.marker.parse import parse_marker
from pytest_swarm.specs import Conversation, Load, SpecError
from tests.standins import openai_standin


@pytest.fixture(scope="module")
def endpoint() -> Iterator[Endpoint]:
    with openai_standin.serve() as url:
        yield Endpoint(url, "standin")


def _chat(tmp_path: Path, conversations: list[list[tuple[str, str]]]) -> str:
    lines = [{"messages": [{"role": role, "content": text} for role, text in c]} for c in conversations]
    (tmp_path / "chat.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return "chat.jsonl"


ANSWERED = [
    [("user", "plan a trip"), ("assistant", "where to and when"), ("user", "Lisbon in May"), ("assistant", "ok")],
    [("user", "what is a mutex"), ("assistant", "a lock one thread holds at a time")],
    [("user", "and a semaphore")],
]


def test_dataset_lengths_are_the_recorded_answers_counted_by_the_servers_tokenizer(
    tmp_path: Path, endpoint: Endpoint
) -> None:
    """The stand-in counts a token a word: 4 and 1 for the first conversation, 8 for the second, and the median of
    those three (4) for the third, which recorded no answer."""
    config = parse_marker((), {"prompts": _chat(tmp_path, ANSWERED), "max_tokens": "dataset"}, rootdir=tmp_path)
    assert config.workload.dataset_lengths and config.workload.pinned and config.workload.max_tokens is None
    info: ServerInfo = {"tokenizer": "llamacpp", "context_tokens": 4096}
    fit = fit_prompts(config, config.workload, "llamacpp:standin", info, endpoint)
    assert dict(fit.answer_tokens) == {"plan a trip": (4, 1), "what is a mutex": (8,), "and a semaphore": (4,)}
    assert "counted by the server's tokenizer (POST /tokenize, llamacpp)" in fit.counted_by


def test_each_session_asks_for_its_conversations_answer_lengths_turn_by_turn(
    tmp_path: Path, endpoint: Endpoint
) -> None:
    config = parse_marker(
        (), {"prompts": _chat(tmp_path, ANSWERED), "max_tokens": "dataset", "turns": "dataset", "concurrency": 3},
        rootdir=tmp_path,
    )  # fmt: skip
    load = Load(concurrency=3, rounds=1, warmup=False)
    fit = fit_prompts(config, config.workload, "s", {"tokenizer": "llamacpp"}, endpoint)
    planner = RoundPlanner(config.workload, load, config.prompt_base, ColdPrompts(), 1, fit)
    rounds, _ = run_load([endpoint], config.workload, load, planner)
    asked = sorted((r.agent, r.turn, r.asked.output_tokens) for r in rounds[0].requests)
    assert asked == [(0, 0, 4), (0, 1, 1), (1, 0, 8), (2, 0, 4)]
    assert all(r.ok for r in rounds[0].requests)


def test_without_a_tokenize_route_answer_lengths_are_estimated_from_words(tmp_path: Path, endpoint: Endpoint) -> None:
    config = parse_marker((), {"prompts": _chat(tmp_path, ANSWERED), "max_tokens": "dataset"}, rootdir=tmp_path)
    fit = fit_prompts(config, config.workload, "ollama:standin", {}, endpoint)
    assert fit.answer_tokens["what is a mutex"] == (11,), "8 words x 4/3, rounded up"
    assert "estimated from words" in fit.counted_by


def test_a_dataset_prompt_beyond_the_servers_context_is_refused_naming_its_line(
    tmp_path: Path, endpoint: Endpoint
) -> None:
    long = " ".join(["word"] * 300)
    prompts = _chat(tmp_path, [[("user", "short one")], [("user", long)], [("user", "another short one")]])
    config = parse_marker((), {"prompts": prompts, "max_tokens": 64}, rootdir=tmp_path)
    info: ServerInfo = {"tokenizer": "llamacpp", "context_tokens": 256}
    with pytest.raises(RequestsBeyondContext) as refused:
        fit_prompts(config, config.workload, "llamacpp:standin", info, endpoint)
    assert str(refused.value).startswith(
        "1 of 3 prompts cannot fit llamacpp:standin's context of 256 tokens a request (what the server said at boot)"
    )
    assert f"{tmp_path / prompts}:2: needs {300 + 64 + TEMPLATE_TOKENS}" in str(refused.value)


def test_whole_conversations_are_held_to_their_last_turn_with_every_answer_before_it(
    tmp_path: Path, endpoint: Endpoint
) -> None:
    """Turn 2 of the first conversation carries turn 1 and its answer: 3 + 64 + 3 + 64 words and two templates fit
    no context of 160, though each turn alone would."""
    prompts = _chat(tmp_path, [[("user", "plan a trip"), ("assistant", "ok"), ("user", "Lisbon in May")]])
    config = parse_marker((), {"prompts": prompts, "turns": "dataset", "max_tokens": 64}, rootdir=tmp_path)
    info: ServerInfo = {"tokenizer": "llamacpp", "context_tokens": 160}
    with pytest.raises(RequestsBeyondContext, match=f"chat.jsonl:1: needs {3 + 64 + 3 + 64 + 2 * TEMPLATE_TOKENS}"):
        fit_prompts(config, config.workload, "llamacpp:standin", info, endpoint)


def test_prompts_that_fit_at_a_token_a_byte_are_not_sent_to_the_tokenizer(tmp_path: Path) -> None:
    """The built-in family fits 2048 even at a byte a token: nothing is counted (the endpoint does not exist)."""
    config = parse_marker((), {"max_tokens": 128})
    nowhere = Endpoint("http://127.0.0.1:9", "none")
    fit = fit_prompts(config, config.workload, "llamacpp:x", {"tokenizer": "llamacpp", "context_tokens": 2048}, nowhere)
    assert dict(fit.answer_tokens) == {} and fit.counted_by == ""


def test_a_tokenize_route_that_fails_names_the_server_and_the_text(tmp_path: Path) -> None:
    with pytest.raises(TokenizeFailed, match=r"POST http://127.0.0.1:9/tokenize \(vllm\) failed on 'hello'"):
        count_tokens(Endpoint("http://127.0.0.1:9", "m"), "vllm", ["hello"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"prompts": "coding", "max_tokens": "dataset"}, "argument max_tokens: 'dataset' takes it from a dataset's"),
        ({"prompts": "chat.jsonl", "max_tokens": "dataset"}, "chat.jsonl records no answer to take a length from"),
        ({"prompts": "chat.jsonl", "max_tokens": "all"}, "argument max_tokens"),
    ],
)
def test_max_tokens_dataset_needs_a_dataset_with_answers(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    _chat(tmp_path, [[("user", "a question nobody answered")]])
    with pytest.raises(SpecError, match=message):
        parse_marker((), kwargs, rootdir=tmp_path)


@given(
    st.lists(st.integers(0, 5000), min_size=1, max_size=6),
    st.lists(st.integers(0, 2000), min_size=6, max_size=6),
    st.integers(0, 500),
)
def test_a_conversation_needs_more_with_every_turn_it_carries(
    turns: list[int], outputs: list[int], system: int
) -> None:
    needs = [conversation_needs(turns[:k], outputs[:k], system) for k in range(1, len(turns) + 1)]
    assert needs == sorted(needs) and needs[0] >= system + turns[0] + outputs[0] + TEMPLATE_TOKENS


def test_answer_lengths_take_the_first_conversation_of_a_repeated_first_turn() -> None:
    """The planner looks a session up by the first turn it drew: the first conversation with it is the one replayed."""
    dataset = (Conversation(("hi",), ("a b",), "f:1"), Conversation(("hi",), ("a b c d",), "f:2"))
    assert answer_lengths(dataset, {"a b": 2, "a b c d": 4}) == {"hi": (2,)}
