"""STAND-IN for a reasoning model's server (not a real model): it thinks, then answers, on an exact clock.

A reasoning model's stream is thought first, answer after, in the field its engine documents:

- vLLM (`--reasoning-parser`): `delta.reasoning` (named `reasoning_content` until January 2026), and the count in
  `usage.completion_tokens_details.reasoning_tokens`;
- llama.cpp (`--reasoning-format deepseek`) and SGLang (`--reasoning-parser`): `delta.reasoning_content`, no count;
- Ollama: `message.thinking` on /api/chat, `thinking` on /api/generate; `eval_count` counts thought and answer.

Its clock is the one the figures must recover: the first token `--first-ms` (100) after the request, then one token
every `--step-ms` (10): `--think` (40) tokens of thought, then `--answer` (8) of answer, unless max_tokens (num_predict)
cuts the stream first, finish reason "length". `--tool` makes the answer a streamed tool call (OpenAI:
`delta.tool_calls` pieces, finish reason "tool_calls"; Ollama: the whole call in `message.tool_calls`).

    python tests/standins/reasoning_standin.py --port P --shape vllm|llamacpp|sglang|ollama [--tool]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

import orjson
from aiohttp import web

FIELDS = {"vllm": "reasoning", "llamacpp": "reasoning_content", "sglang": "reasoning_content"}
ARGS = web.AppKey("args", argparse.Namespace)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="reasoning_standin")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--shape", choices=[*FIELDS, "ollama"], required=True)
    parser.add_argument("--first-ms", type=float, default=100.0)
    parser.add_argument("--step-ms", type=float, default=10.0)
    parser.add_argument("--think", type=int, default=40)
    parser.add_argument("--answer", type=int, default=8)
    parser.add_argument("--tool", action="store_true")
    return parser.parse_args(argv)


def plan(args: argparse.Namespace, max_tokens: int | None) -> tuple[list[str], str]:
    """Each token's kind in order ("think", "answer", "tool"), and how the stream finished."""
    kinds = ["think"] * args.think + ["tool" if args.tool else "answer"] * args.answer
    if max_tokens is not None and max_tokens < len(kinds):
        return kinds[:max_tokens], "length"
    return kinds, "tool_calls" if args.tool else "stop"


async def _clock(kinds: list[str], args: argparse.Namespace) -> Any:
    """Yield each token's index at its instant: first_ms after the request, then one a step, on absolute times."""
    origin = time.perf_counter() + args.first_ms / 1e3
    for i in range(len(kinds)):
        delay = origin + i * args.step_ms / 1e3 - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        yield i


def _split(text: str, n: int) -> list[str]:
    """`text` in `n` pieces, one a token: a cut stream leaves the arguments unfinished, as a real one does."""
    size = -(-len(text) // n) if n else 0
    return [text[i * size : (i + 1) * size] for i in range(n)]


def _sse(data: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(data) + b"\n\n"


async def chat_completions(request: web.Request) -> web.StreamResponse:
    args = request.app[ARGS]
    body = orjson.loads(await request.read())
    kinds, finish = plan(args, body.get("max_tokens"))
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    field = FIELDS[args.shape]
    head = {"id": "chatcmpl-standin", "object": "chat.completion.chunk", "model": body.get("model", "standin")}
    await response.write(_sse({**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}))
    tools = kinds.count("tool")
    pieces = _split('{"path": "src/app.py"}', tools)
    async for i in _clock(kinds, args):
        kind = kinds[i]
        last = i == len(kinds) - 1
        if kind == "think":
            delta: dict[str, Any] = {field: f" t{i}"}
        elif kind == "answer":
            delta = {"content": f" a{i}"}
        else:
            k = i - kinds.index("tool")
            call: dict[str, Any] = {"index": 0, "function": {"arguments": pieces[k]}}
            if k == 0:
                call |= {"id": "chatcmpl-tool-standin", "type": "function"}
                call["function"]["name"] = "read_file"
            delta = {"tool_calls": [call]}
        choice = {"index": 0, "delta": delta, "finish_reason": finish if last else None}
        await response.write(_sse({**head, "choices": [choice]}))
    thought = kinds.count("think")
    usage: dict[str, Any] = {"prompt_tokens": 12, "completion_tokens": len(kinds), "total_tokens": 12 + len(kinds)}
    if args.shape == "vllm":
        usage["completion_tokens_details"] = {"reasoning_tokens": thought}
    await response.write(_sse({**head, "choices": [], "usage": usage}))
    await response.write(b"data: [DONE]\n\n")
    return response


async def ollama(request: web.Request) -> web.StreamResponse:
    args = request.app[ARGS]
    body = orjson.loads(await request.read())
    chat = request.path == "/api/chat"
    kinds, finish = plan(args, (body.get("options") or {}).get("num_predict"))
    response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
    await response.prepare(request)
    started = time.perf_counter()
    async for i in _clock(kinds, args):
        kind = kinds[i]
        if kind == "tool":
            if i != len(kinds) - 1:
                continue  # Ollama sends a call whole, once parsed: on the answer's last token
            call = {"function": {"name": "read_file", "arguments": {"path": "src/app.py"}}}
            obj: dict[str, Any] = {"message": {"role": "assistant", "content": "", "tool_calls": [call]}}
        elif chat:
            key = "thinking" if kind == "think" else "content"
            obj = {"message": {"role": "assistant", "content": "", key: f" {kind[0]}{i}"}}
        else:
            obj = {"response": "", "thinking": f" t{i}"} if kind == "think" else {"response": f" a{i}"}
        await response.write(orjson.dumps({"model": body.get("model"), "done": False, **obj}) + b"\n")
    took = int((time.perf_counter() - started) * 1e9)
    final = {
        "model": body.get("model"),
        "done": True,
        "done_reason": "length" if finish == "length" else "stop",
        "eval_count": len(kinds),
        "eval_duration": took,
        "prompt_eval_count": 12,
        "prompt_eval_duration": int(args.first_ms * 1e6),
        "total_duration": took,
        **({"message": {"role": "assistant", "content": ""}} if chat else {"response": ""}),
    }
    await response.write(orjson.dumps(final) + b"\n")
    return response


async def health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    app = web.Application()
    app[ARGS] = args
    app.router.add_get("/health", health)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/api/chat", ollama)
    app.router.add_post("/api/generate", ollama)
    web.run_app(app, host=args.host, port=args.port, print=None, handle_signals=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
