"""A stand-in OpenAI-protocol streaming server for client tests, behaviour chosen per prompt.

It speaks the protocol as llama.cpp and vLLM do (one `data:` event per token, a
final event with `usage`, then `data: [DONE]`), and misbehaves on request: the
prompt names the fault, so one server serves every case.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
from aiohttp import web

TOKENS = 5
STOPPING = web.AppKey("stopping", asyncio.Event)


def _event(data: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(data) + b"\n\n"


def _token(text: str) -> bytes:
    return _event({"choices": [{"text": text, "index": 0, "finish_reason": None}]})


def _final(completion_tokens: int, prompt_tokens: int, cached: int = 0) -> bytes:
    return _event(
        {
            "choices": [{"text": "", "index": 0, "finish_reason": "length"}],
            "usage": {
                "completion_tokens": completion_tokens,
                "prompt_tokens": prompt_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        }
    )


async def _completions(request: web.Request) -> web.StreamResponse:
    body = orjson.loads(await request.read())
    fault = body["prompt"].split("] ", 1)[-1]
    prompt_tokens = 1 + len(body["prompt"].split())  # a BOS, then a token a word, as POST /tokenize counts them
    if fault == "http500":
        return web.json_response({"error": {"message": "out of memory", "code": 500}}, status=500)
    if fault == "html":
        return web.Response(text="<html>proxy error</html>", content_type="text/html")
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    if fault == "close":  # `Connection: close`, then the server closes: a connection per request
        response.force_close()
    await response.prepare(request)
    if fault == "hang":
        await request.app[STOPPING].wait()
        return response
    for i in range(TOKENS):
        await response.write(_token(f" t{i}"))
        await asyncio.sleep(0.002)
        if fault == "stall" and i == 1:
            await request.app[STOPPING].wait()
            return response
    if fault == "badjson":
        await response.write(b"data: {not json\n\n")
    elif fault == "error_event":
        await response.write(_event({"error": {"message": "slot crashed", "type": "server_error"}}))
    elif fault == "no_done":
        await response.write(_final(TOKENS, prompt_tokens))
        return response
    elif fault == "truncated":
        await response.write(b'data: {"choices": [{"te')
        return response
    elif fault == "miscount":
        await response.write(
            _final(TOKENS - 3, prompt_tokens)
        )  # fewer tokens than content chunks: impossible, so a disagreement
    else:
        await response.write(_final(TOKENS, prompt_tokens, cached=4 if fault == "cached" else 0))
    await response.write(b"data: [DONE]\n\n")
    return response


async def _models(request: web.Request) -> web.Response:
    """What an endpoint measured through --swarm-endpoint is asked first: the model it serves."""
    return web.json_response({"object": "list", "data": [{"id": "standin", "object": "model", "owned_by": "standin"}]})


async def _tokenize(request: web.Request) -> web.Response:
    """llama.cpp's POST /tokenize, a token a word: what a test can count by hand."""
    body = orjson.loads(await request.read())
    return web.json_response({"tokens": list(range(len(body["content"].split())))})


@contextmanager
def serve_app(app: web.Application) -> Iterator[str]:
    """Run an aiohttp app on a free loopback port in a thread; yields its base URL."""
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


@contextmanager
def serve() -> Iterator[str]:
    """The OpenAI stand-in on a free loopback port; yields its base URL."""
    app = web.Application()
    app[STOPPING] = asyncio.Event()

    async def on_shutdown(app: web.Application) -> None:
        app[STOPPING].set()

    app.on_shutdown.append(on_shutdown)
    app.router.add_post("/v1/completions", _completions)
    app.router.add_get("/v1/models", _models)
    app.router.add_post("/tokenize", _tokenize)
    with serve_app(app) as url:
        yield url
