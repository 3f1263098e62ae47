"""The Ollama /api/generate client against an in-process NDJSON server that misbehaves on request.

The server speaks the protocol of Ollama's docs/api.md (one JSON object per line,
`application/x-ndjson`, the last with `done` and the eval figures; errors as
`{"error": "..."}`); the prompt names the fault, so one server serves every case.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from aiohttp import web

from pytest_swarm.client import Endpoint
from pytest_swarm.core.records import RequestRecord
from pytest_swarm.figures.server import server_decode_tps
from pytest_swarm.load.rounds import run_load
from pytest_swarm.specs import Load, Workload
from tests.factories import TakePlanner
from tests.standins.openai_standin import serve_app

TOKENS = 5
BODIES = web.AppKey("bodies", list)
FINAL = {
    "total_duration": 900_000_000,
    "load_duration": 1_000_000,
    "prompt_eval_count": 11,
    "prompt_eval_duration": 50_000_000,
    "eval_count": TOKENS,
    "eval_duration": 250_000_000,
}


def _line(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj) + b"\n"


async def _generate(request: web.Request) -> web.StreamResponse:
    body = orjson.loads(await request.read())
    fault = body["prompt"].split("] ", 1)[-1]
    request.app[BODIES].append(body)
    if fault == "http404":
        return web.json_response({"error": f"model '{body['model']}' not found"}, status=404)
    if fault == "json":
        return web.json_response({"model": body["model"], "response": "all at once", "done": True})
    response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
    await response.prepare(request)
    if fault == "hang":
        await asyncio.sleep(30)
    for i in range(TOKENS):
        await response.write(
            _line({"model": body["model"], "created_at": "2025-01-01T00:00:00Z", "response": f" t{i}", "done": False})
        )
        await asyncio.sleep(0.002)
    if fault == "error_line":
        await response.write(_line({"error": "an error was encountered while running the model: CUDA error"}))
        return response
    if fault == "malformed":
        await response.write(b"{not json\n")
        return response
    if fault == "no_done":
        return response
    done = {
        "model": body["model"],
        "created_at": "2025-01-01T00:00:00Z",
        "response": "",
        "done": True,
        "done_reason": "stop" if fault == "short" else "length",
        **FINAL,
    }
    if fault == "short":
        done["eval_count"] = 3
    raw = _line(done)
    await response.write(raw[:-1] if fault == "no_newline" else raw)
    return response


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    app = web.Application()
    bodies: list[dict[str, Any]] = []
    app[BODIES] = bodies
    app.router.add_post("/api/generate", _generate)
    with serve_app(app) as url:
        yield url, bodies


def _run(url: str, fault: str, timeout_s: float = 5.0, workload: Workload | None = None) -> RequestRecord:
    load = Load(concurrency=1, rounds=1, warmup=False, request_timeout_s=timeout_s)
    endpoint = Endpoint(url, "gemma3-270m", protocol="ollama", headers=(("Authorization", "Bearer k"),))
    (round_,), _ = run_load(
        [endpoint], workload or Workload(max_tokens=TOKENS), load, TakePlanner(lambda n: [f"[n] {fault}"] * n, load)
    )
    (record,) = round_.requests
    return record


def test_a_good_stream_records_tokens_and_the_servers_own_figures(server: tuple[str, list[dict[str, Any]]]) -> None:
    url, bodies = server
    record = _run(url, "ok")
    assert record.error is None and record.content_chunks == TOKENS and record.output_tokens == TOKENS
    assert record.usage_reported and record.prompt_tokens == 11 and record.finish_reason == "length"
    assert record.server_timings == FINAL
    assert server_decode_tps(record) == pytest.approx(20.0)
    assert record.decode_tps is not None and record.ttft is not None and 0 < record.ttft < record.end - record.start
    assert bodies[-1]["options"]["num_predict"] == TOKENS and bodies[-1]["stream"] is True


def test_a_short_answer_shows_in_eval_count(server: tuple[str, list[dict[str, Any]]]) -> None:
    record = _run(server[0], "short")
    assert record.ok and record.output_tokens == 3 and record.finish_reason == "stop"


def test_a_last_line_without_newline_still_counts(server: tuple[str, list[dict[str, Any]]]) -> None:
    assert _run(server[0], "no_newline").ok


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        ("http404", 'HTTP 404: {"error": "model \'gemma3-270m\' not found"}'),
        ("json", "not a stream (content type 'application/json'):"),
        ("error_line", "server error: an error was encountered while running the model: CUDA error"),
        ("malformed", "malformed line: {not json"),
        ("no_done", 'stream ended without its "done": true object'),
    ],
)
def test_each_fault_is_a_failure_with_the_servers_own_words(
    server: tuple[str, list[dict[str, Any]]], fault: str, words: str
) -> None:
    record = _run(server[0], fault)
    assert not record.ok and record.error is not None and record.error.startswith(words), record.error


def test_a_hung_server_times_out(server: tuple[str, list[dict[str, Any]]]) -> None:
    record = _run(server[0], "hang", timeout_s=0.5)
    assert record.error == "timeout after 0.5 s" and record.end - record.start < 2.0
