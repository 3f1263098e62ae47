"""The load stage finishes each request: its path and body per protocol, and the client sends only what it serves."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from pytest_swarm.client import Endpoint, Request, make_client
from pytest_swarm.core.records import RequestRecord, ToolCall, ToolExchange
from pytest_swarm.load.bodies import bodies_for, senders_for
from pytest_swarm.specs import Workload

CONVERSATION = (("user", "fix a.py"), ToolExchange((ToolCall("c1", "read_file", "{}"),), ("ok",), ""))


def test_each_protocol_picks_its_path_and_names_the_servers_model() -> None:
    completions = bodies_for(Endpoint("http://h", "gemma"), Workload(max_tokens=8))
    path, body = completions("hi", None)
    assert path == "/v1/completions"
    assert orjson.loads(body)["model"] == "gemma" and orjson.loads(body)["max_tokens"] == 8
    chat = bodies_for(Endpoint("http://h", "gemma"), Workload(api="chat"))
    path, body = chat(CONVERSATION, 3)
    assert path == "/v1/chat/completions" and orjson.loads(body)["max_tokens"] == 3, "a trace's length wins"
    ollama = bodies_for(Endpoint("http://h", "gemma3:270m", "ollama"), Workload(api="chat"))
    assert ollama("hi", None)[0] == "/api/generate"
    path, body = ollama(CONVERSATION, None)
    assert path == "/api/chat" and orjson.loads(body)["messages"][0] == {"role": "user", "content": "fix a.py"}


def test_a_protocol_without_bodies_or_a_client_is_refused_when_the_round_is_set_up() -> None:
    with pytest.raises(ValueError, match="no request bodies for protocol 'grpc'"):
        bodies_for(Endpoint("http://h", "m", "grpc"), Workload())
    with pytest.raises(ValueError, match="no client for protocol 'grpc'"):
        senders_for([Endpoint("http://h", "m", "grpc")], Workload(), 1.0)


def test_a_client_refuses_a_path_its_protocol_does_not_serve_before_it_opens_a_connection() -> None:
    client = make_client(Endpoint("http://127.0.0.1:9", "m", "ollama"), 1.0)
    out: list[RequestRecord] = []
    with pytest.raises(ValueError, match="OllamaStreamClient serves /api/generate, /api/chat, not '/v1/completions'"):
        asyncio.run(client.send(Request(0, "/v1/completions", b"{}"), out))
    assert out == [], "nothing was sent, so nothing is recorded"
