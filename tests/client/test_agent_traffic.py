"""What the clients read of a reasoning model and a tool-calling agent, and what they send for one.

Every token-bearing field marks a token: answer text, the thought (vLLM's `reasoning`, the `reasoning_content` of
llama.cpp, SGLang and vLLM before 2026, Ollama's `thinking`), a piece of a tool call. The shapes are the engines'
documented ones: OpenAI-protocol tool calls stream as `delta.tool_calls[]` pieces, the id and name once, the
arguments in parts; Ollama's come whole, arguments as an object.
"""

from __future__ import annotations

import orjson

from pytest_swarm.client.ollama import NDJSONReader
from pytest_swarm.client.openai import SSEReader
from pytest_swarm.core.records import AnswerParts, RequestRecord, ToolCall, ToolExchange
from pytest_swarm.load.bodies import messages_of, ollama_body, ollama_messages, openai_body
from pytest_swarm.load.tools import tools_json
from pytest_swarm.specs import AgentTraffic, Workload


def _sse(*events: dict[str, object]) -> list[bytes]:
    return [b"data: " + orjson.dumps(e) + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]


def _delta(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _read(reads: list[bytes], record: RequestRecord) -> RequestRecord:
    reader = SSEReader(record)
    for i, data in enumerate(reads):
        assert reader.feed(data, float(i + 1))
    reader.finish()
    return record


def test_thought_then_answer_each_read_a_token_the_answer_timed_apart() -> None:
    reads = _sse(
        _delta({"role": "assistant", "content": ""}),
        _delta({"reasoning": "let"}),
        _delta({"reasoning_content": " me", "content": None}),
        _delta({"reasoning": " think"}),
        _delta({"content": "42"}),
        _delta({"content": "."}, "stop"),
        {"choices": [], "usage": {"completion_tokens": 5, "completion_tokens_details": {"reasoning_tokens": 3}}},
    )
    record = _read(reads, RequestRecord(0, 0.0, parts=AnswerParts(text=[])))
    assert record.token_times == [2.0, 3.0, 4.0, 5.0, 6.0], "the role chunk carries no token; every other one does"
    assert record.ttft == 2.0 and record.ttft_answer == 5.0 and record.parts.reasoning_chunks == 3
    assert (record.reasoning_tokens, record.answer_tokens, record.reasoning_counted_by) == (3, 2, "server")
    assert record.text == "42." and record.finish_reason == "stop" and record.decode_tps == 4 / 4.0


def test_without_the_server_s_count_the_thought_is_counted_a_chunk_each() -> None:
    record = _read(_sse(_delta({"reasoning_content": "a"}), _delta({"content": "b"})), RequestRecord(0, 0.0))
    assert (record.output_tokens, record.reasoning_tokens, record.answer_tokens) == (2, 1, 1)
    assert record.reasoning_counted_by == "chunks"


def test_a_streamed_tool_call_is_assembled_and_its_first_piece_is_the_first_answer_token() -> None:
    call = {"index": 0, "id": "call_7", "type": "function", "function": {"name": "read_file", "arguments": ""}}
    reads = _sse(
        _delta({"role": "assistant", "content": None}),
        _delta({"tool_calls": [call]}),
        _delta({"tool_calls": [{"index": 0, "function": {"arguments": '{"path": '}}]}),
        _delta({"tool_calls": [{"index": 0, "function": {"arguments": '"a.py"}'}}]}),
        _delta({"tool_calls": [{"index": 1, "id": "call_8", "function": {"name": "run_tests", "arguments": "{"}}]}),
        _delta({}, "tool_calls"),
        {"choices": [], "usage": {"completion_tokens": 9}},
    )
    record = _read(reads, RequestRecord(0, 0.0))
    assert record.ok and record.ttft == 2.0 and record.ttft_answer == 2.0 and record.finish_reason == "tool_calls"
    first, second = record.tool_calls
    assert first == ToolCall("call_7", "read_file", '{"path": "a.py"}') and first.valid
    assert second == ToolCall("call_8", "run_tests", "{") and not second.valid, "cut arguments are counted invalid"


def test_a_stream_with_no_token_of_any_kind_has_no_token_times() -> None:
    record = _read(
        _sse(_delta({"role": "assistant"}), {"choices": [], "usage": {"completion_tokens": 3}}), RequestRecord(0, 0.0)
    )
    assert record.token_times == [] and record.output_tokens == 3, "the client marks it failed (base.py): no token came"


def _ndjson(record: RequestRecord, *objects: dict[str, object]) -> RequestRecord:
    reader = NDJSONReader(record)
    for i, obj in enumerate(objects):
        assert reader.feed(orjson.dumps(obj) + b"\n", float(i + 1))
    reader.finish()
    return record


def test_ollama_thinking_on_chat_and_generate_and_a_whole_tool_call() -> None:
    chat = _ndjson(
        RequestRecord(0, 0.0),
        {"message": {"role": "assistant", "content": "", "thinking": "hm"}, "done": False},
        {
            "message": {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "read_file", "arguments": {"path": "a.py"}}}],
            },
            "done": False,
        },
        {"message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop", "eval_count": 7},
    )
    assert chat.token_times == [1.0, 2.0] and chat.ttft_answer == 2.0 and chat.reasoning_tokens == 1
    assert chat.tool_calls == (ToolCall("call_0", "read_file", '{"path":"a.py"}'),) and chat.output_tokens == 7
    generate = _ndjson(
        RequestRecord(0, 0.0),
        {"response": "", "thinking": "hm", "done": False},
        {"response": "ok", "done": False},
        {"response": "", "done": True, "done_reason": "stop", "eval_count": 2},
    )
    assert generate.token_times == [1.0, 2.0] and generate.parts.reasoning_chunks == 1 and generate.ttft_answer == 2.0


EXCHANGE = ToolExchange((ToolCall("c1", "read_file", '{"path": "a.py"}'),), ("print(1)",), "reading it")
CONVERSATION = (("user", "fix a.py"), EXCHANGE)


def test_a_tool_exchange_goes_back_as_each_protocol_documents() -> None:
    assert messages_of(CONVERSATION) == [
        {"role": "user", "content": "fix a.py"},
        {
            "role": "assistant",
            "content": "reading it",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "print(1)"},
    ]
    assert ollama_messages(CONVERSATION)[1:] == [
        {
            "role": "assistant",
            "content": "reading it",
            "tool_calls": [{"function": {"name": "read_file", "arguments": {"path": "a.py"}}}],
        },
        {"role": "tool", "tool_name": "read_file", "content": "print(1)"},
    ]


def _workload(**kwargs: object) -> Workload:
    return Workload(api="chat", pinned=False, agent=AgentTraffic(**kwargs))  # type: ignore[arg-type]


def test_the_openai_body_asks_for_tools_a_schema_and_a_thinking_switch() -> None:
    tools = tools_json(["read_file"])
    body = orjson.loads(
        openai_body(
            _workload(
                tools=tools,
                tool_choice="read_file",
                parallel_tool_calls=False,
                reasoning="off",
                response_format='{"type":"object"}',
            ),
            "m",
            "hi",
            None,
        )
    )
    assert body["tools"] == orjson.loads(tools) and "ignore_eos" not in body
    assert body["tool_choice"] == {"type": "function", "function": {"name": "read_file"}}
    assert body["parallel_tool_calls"] is False
    assert body["chat_template_kwargs"] == {"enable_thinking": False, "thinking": False}
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": {"type": "object"}, "strict": True},
    }
    effort = orjson.loads(openai_body(_workload(reasoning="high"), "m", "hi", None))
    assert effort["reasoning_effort"] == "high" and effort["chat_template_kwargs"]["enable_thinking"] is True
    plain = orjson.loads(openai_body(_workload(), "m", "hi", None))
    assert not {"tools", "tool_choice", "chat_template_kwargs", "reasoning_effort", "response_format"} & plain.keys()


def test_the_ollama_body_asks_with_think_tools_and_format() -> None:
    tools = tools_json("coding")
    body = orjson.loads(ollama_body(_workload(tools=tools, reasoning="on"), "m", CONVERSATION, None))
    assert body["think"] is True and body["tools"] == orjson.loads(tools) and body["messages"][2]["role"] == "tool"
    effort = orjson.loads(ollama_body(_workload(reasoning="low", response_format='{"type":"object"}'), "m", "x", None))
    assert effort["think"] == "low" and effort["format"] == {"type": "object"}
    assert orjson.loads(ollama_body(_workload(reasoning="off"), "m", "x", None))["think"] is False
