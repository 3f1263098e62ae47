"""Ollama's native streaming `/api/generate` and `/api/chat` client: failures land in `record.error`, never raised."""

from __future__ import annotations

import time
from typing import Any

import orjson

from ..core.records import RequestRecord, ToolCallBuilder
from .base import HttpStreamClient
from .server_clock import ollama_clock
from .transport import ERROR_BODY_LIMIT, BodyReader

GENERATE = "/api/generate"
CHAT = "/api/chat"

SERVER_FIGURES = (
    "eval_count",
    "eval_duration",
    "prompt_eval_count",
    "prompt_eval_duration",
    "load_duration",
    "total_duration",
)
"""The final object's fields kept on the record (`server_timings`)."""


class OllamaStreamClient(HttpStreamClient):
    """Streams POST /api/generate or /api/chat (newline-delimited JSON)."""

    paths = (GENERATE, CHAT)
    accept = "application/x-ndjson"

    def reader(self, record: RequestRecord) -> BodyReader:
        return NDJSONReader(record)


class NDJSONReader:
    """Lines of one /api/generate stream into its record, up to the `"done": true` object."""

    __slots__ = ("_done", "_pending", "_record")

    def __init__(self, record: RequestRecord) -> None:
        self._record = record
        self._pending = b""
        self._done = False

    def feed(self, data: bytes, now: float) -> bool:
        *lines, self._pending = (self._pending + data).split(b"\n")
        for line in lines:
            if not line.strip():
                continue
            verdict = _on_line(line, now, self._record)
            if verdict is None:
                return False
            self._done = self._done or verdict
        return True

    def finish(self) -> None:
        pending = self._pending
        if pending.strip() and not self._done:
            # A last line without its newline is still a whole object if it parses.
            verdict = _on_line(pending, time.perf_counter(), self._record)
            if verdict is None:
                return
            self._done = verdict
            pending = b""
        if not self._done:
            tail = pending[:ERROR_BODY_LIMIT].decode("utf-8", "replace")
            self._record.error = 'stream ended without its "done": true object' + (
                f"; unterminated line: {tail}" if tail else ""
            )


def _on_line(line: bytes, now: float, record: RequestRecord) -> bool | None:
    """Apply one NDJSON object to the record: True when it was the final one, None to stop on a fault."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        record.error = "malformed line: " + line[:ERROR_BODY_LIMIT].decode("utf-8", "replace")
        return None
    if not isinstance(obj, dict):
        record.error = "malformed line: " + line[:ERROR_BODY_LIMIT].decode("utf-8", "replace")
        return None
    if "error" in obj:
        record.error = "server error: " + str(obj["error"])[:ERROR_BODY_LIMIT]
        return None
    message = None
    text = obj.get("response")
    if text is None:
        message = obj.get("message")
        text = message.get("content") if isinstance(message, dict) else None
    if text:
        record.token_times.append(now)
        if record.first_answer is None:
            record.first_answer = now
        if record.parts.text is not None:
            record.parts.text.append(text)
    else:
        _apply_other(obj, message if isinstance(message, dict) else None, now, record)
    if not obj.get("done"):
        return False
    record.finish_reason = obj.get("done_reason")
    figures = {name: obj[name] for name in SERVER_FIGURES if isinstance(obj.get(name), (int, float))}
    record.server_timings = figures or None
    record.server_clock = ollama_clock(figures)
    if "eval_count" in figures:
        record.usage_reported = True
        record.output_tokens = int(figures["eval_count"])
    else:
        record.output_tokens = record.content_chunks
    prompt_tokens = figures.get("prompt_eval_count")
    record.prompt_tokens = None if prompt_tokens is None else int(prompt_tokens)
    return True


def _apply_other(obj: dict[str, Any], message: dict[str, Any] | None, now: float, record: RequestRecord) -> None:
    """A line without answer text that may carry a token all the same: thinking, or whole tool calls."""
    thinking = message.get("thinking") if message is not None else obj.get("thinking")
    calls = message.get("tool_calls") if message is not None else None
    if thinking:
        record.token_times.append(now)
        record.parts.reasoning_chunks += 1
    if not calls or not isinstance(calls, list):
        return
    if not thinking:
        record.token_times.append(now)
    builders = record.answering_with_tools(now)
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue
        arguments = function.get("arguments")
        text = arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()
        ident = call.get("id") or f"call_{len(builders)}"
        builders.append(ToolCallBuilder(str(ident), str(function.get("name") or ""), [text]))
