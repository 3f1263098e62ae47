"""Tools offered by the marker, checked at collection; the results a tool session sends back; the figures of answers.

A bad schema is an error naming the marker argument and the entry at fault, never a request that fails minutes
later. A tool's result is text shaped like the real tool's output, the same for the same call in every generator.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm.core.records import RequestRecord, ToolCall, ToolCallBuilder, ToolExchange
from pytest_swarm.figures.agent import agent_figures
from pytest_swarm.load.sessions import SessionPlan, render
from pytest_swarm.load.tools import CODING_TOOLS, tool_result, tools_json
from pytest_swarm.marker.parse import parse_marker
from pytest_swarm.specs import AgentTraffic, SpecError, Workload


def _function(name: str = "lookup", **parameters: Any) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, **parameters}
    return {"type": "function", "function": {"name": name, "description": "look it up", "parameters": schema}}


def test_the_coding_set_and_a_mixed_list_become_openai_tools() -> None:
    coding = json.loads(tools_json("coding"))
    assert [t["function"]["name"] for t in coding] == list(CODING_TOOLS)
    assert all(t["type"] == "function" and t["function"]["parameters"]["type"] == "object" for t in coding)
    mixed = json.loads(tools_json(["read_file", _function()]))
    assert [t["function"]["name"] for t in mixed] == ["read_file", "lookup"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tools": ["read_fil"]}, "argument tools: tool 0: 'read_fil' is not a built-in tool"),
        ({"tools": "everything"}, "argument tools: 'everything' is not a built-in set"),
        ({"tools": [{"name": "x"}]}, 'argument tools: tool 0: an OpenAI tool is {"type": "function"'),
        ({"tools": [_function("has space")]}, "argument tools: tool 0: function.name must be 1-64 letters"),
        (
            {"tools": ["read_file", _function(properties={"q": {"type": "strng"}})]},
            "argument tools: tool 1 (lookup): function.parameters is not a valid JSON Schema at properties/q/type",
        ),
        ({"tools": [_function(type="array")]}, "function.parameters must describe an object"),
        ({"tools": [_function(), _function()]}, "two tools share a name: lookup"),
        ({"tools": "coding", "api": "completions"}, "argument tools: needs api='chat'"),
        ({"reasoning": "on"}, "argument reasoning: needs api='chat'"),
        ({"reasoning": "deep", "api": "chat"}, "argument reasoning='deep': expected one of 'on', 'off'"),
        ({"tools": "coding", "tool_choice": "grep", "api": "chat"}, "argument tool_choice='grep': not one of auto"),
        ({"tool_choice": "auto", "api": "chat"}, "argument tool_choice: needs tools="),
        ({"tools": "coding", "api": "chat", "pinned": True}, "argument pinned: True forces every answer to max_tokens"),
        ({"response_format": {"type": "object", "required": 3}, "api": "chat"}, "argument response_format: the schema"),
    ],
)
def test_a_bad_tool_or_schema_names_the_argument_and_the_entry(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)").replace("{", r"\{")):
        parse_marker((), kwargs)


def test_tools_answer_at_their_natural_length_and_the_embedded_model_gets_a_template_that_knows_tools() -> None:
    config = parse_marker((), {"tools": "coding", "api": "chat", "tool_choice": "required", "max_tokens": 64})
    assert config.workload.pinned is False and config.workload.agent.tool_choice == "required"
    assert getattr(config.server, "chat_template", "").endswith("gemma3-tools.jinja")
    assert getattr(parse_marker((), {"api": "chat"}).server, "chat_template", "") is None


def test_an_engine_that_needs_a_tool_parser_or_has_no_tool_choice_is_told_so_at_collection() -> None:
    from pytest_swarm import Server

    for choice in ("auto", "required", "read_file"):
        with pytest.raises(
            SpecError, match=r"argument tools: vllm takes tools only with a parser .* tool_call_parser="
        ):
            parse_marker((), {"server": Server.vllm("m"), "tools": "coding", "api": "chat", "tool_choice": choice})
    parsed = parse_marker((), {"server": Server.vllm("m", tool_call_parser="hermes"), "tools": "coding", "api": "chat"})
    assert parsed.server.engine == "vllm"
    embedded = parse_marker((), {"server": Server.vllm("gemma3-270m"), "tools": "coding", "api": "chat"}).server
    assert getattr(embedded, "tool_call_parser", None) == "hermes", "the embedded model's template writes Hermes calls"
    assert str(getattr(embedded, "chat_template", "")).endswith("gemma3-tools.jinja")
    with pytest.raises(SpecError, match="argument tool_choice: Ollama's /api/chat has no such field"):
        parse_marker((), {"server": Server.ollama("m"), "tools": "coding", "api": "chat", "tool_choice": "auto"})


@given(st.sampled_from([*CODING_TOOLS, "custom"]), st.text(max_size=30), st.integers(8, 400))
def test_a_tool_result_is_the_same_for_the_same_call_and_about_its_size(name: str, arguments: str, tokens: int) -> None:
    call = ToolCall("c", name, arguments)
    result = tool_result(call, tokens)
    assert result == tool_result(ToolCall("other id", name, arguments), tokens)
    words = len(result.split())
    assert tokens / 3 <= words <= tokens + 40, (words, tokens)


def test_a_turn_answered_with_tool_calls_is_followed_by_their_results_in_place_of_a_follow_up() -> None:
    workload = Workload(api="chat", pinned=False, turns=3, agent=AgentTraffic(tools=tools_json("coding")))
    plan = SessionPlan(0, "fix the bug", ("first follow-up", "second follow-up"), ("n0", "n1", "n2"), (0.0, 0.0))
    exchange = ToolExchange((ToolCall("c1", "run_tests", "{}"),), ("1 failed",))
    messages = render(workload, plan, [exchange, "done"])
    assert not isinstance(messages, str)
    assert messages[1] == exchange and messages[2:] == (("assistant", "done"), ("user", "first follow-up"))


def _record(
    *, ok: bool = True, thought: int = 0, calls: tuple[str, ...] = (), finish: str | None = "stop"
) -> RequestRecord:
    record = RequestRecord(0, 0.0, token_times=[1.0] * (thought + 1), output_tokens=thought + 4, finish_reason=finish)
    record.parts.reasoning_chunks = thought
    record.first_answer = None if thought and not calls and finish == "length" else 1.0
    record.parts.tool_builders = [ToolCallBuilder(f"c{i}", "f", [a]) for i, a in enumerate(calls)] or None
    record.error = None if ok else "server error: boom"
    return record


def test_the_answers_figures_count_thought_calls_invalid_arguments_and_finishes() -> None:
    records = [
        _record(thought=3),
        _record(thought=5, finish="length"),
        _record(calls=('{"path": "a"}', '{"pa'), finish="tool_calls"),
        _record(ok=False, finish=None),
    ]
    figures = agent_figures(records)
    assert figures.reasoning_tokens.max == 5 and figures.reasoning_counted_by == "chunks" and figures.reasoned
    assert figures.thought_only == 1 and figures.answer_tokens.p50 == 4
    assert (figures.tool_call_answers, figures.tool_calls, figures.invalid_tool_calls) == (1, 2, 1)
    assert figures.tool_call_share == pytest.approx(1 / 3)
    assert figures.finish_reasons == {"stop": 1, "length": 1, "tool_calls": 1}
    assert not agent_figures([_record()]).reasoned
