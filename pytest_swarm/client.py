"""The streaming OpenAI-protocol client that produces one RequestRecord per request.

An asyncio protocol with llhttp underneath (http_stream), our own SSE split and
orjson: a fraction of the client CPU per token of httpx, the openai SDK or even
aiohttp (benchmarks/harness_overhead.py), so the harness measures the server and
not itself. Timestamps are taken once per network read, as the loop hands the
bytes over; only what a figure needs is pulled out of each event.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from .http_stream import ERROR_BODY_LIMIT, BodyReader, Target, post_stream
from .records import RequestRecord
from .spec import Workload
from .sse import SSESplitter

_DONE = b"[DONE]"


@dataclass(frozen=True)
class Endpoint:
    """Where requests go, in which protocol, and under which model name the server knows its model.

    `headers` carries what every request needs (an Authorization header for an
    external endpoint); it is never written to a report, and kept out of repr() so
    that no traceback or log line can show it.
    """

    base_url: str
    model: str
    protocol: str = "openai"
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)


def request_body(workload: Workload, endpoint: Endpoint, prompt: str) -> bytes:
    """The JSON body of one streaming request; pinned output uses `ignore_eos`."""
    body: dict[str, Any] = {
        "model": endpoint.model,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": workload.temperature,
        "top_p": workload.top_p,
    }
    if workload.api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    if workload.max_tokens is not None:
        body["max_tokens"] = workload.max_tokens
    if workload.pinned:
        body["ignore_eos"] = True
    if workload.seed is not None:
        body["seed"] = workload.seed
    return orjson.dumps(body)


def _on_event(payload: bytes, now: float, record: RequestRecord) -> bool:
    """Apply one event to the record; False stops the stream on a fault. The hottest function of the harness."""
    try:
        event = orjson.loads(payload)
    except orjson.JSONDecodeError:
        record.error = "malformed event: " + payload[:ERROR_BODY_LIMIT].decode("utf-8", "replace")
        return False
    if type(event) is not dict:
        record.error = "malformed event: " + payload[:ERROR_BODY_LIMIT].decode("utf-8", "replace")
        return False
    if "error" in event or event.get("object") == "error":
        # {"error": {...}} from current vLLM and llama.cpp; a bare ErrorResponse
        # ({"object": "error", "message": ...}) from vLLM before 0.10.
        detail = event["error"] if "error" in event else event
        record.error = "server error: " + orjson.dumps(detail).decode()[:ERROR_BODY_LIMIT]
        return False
    choices = event.get("choices")
    if choices:
        choice = choices[0]
        text = choice.get("text")
        if text is None:
            delta = choice.get("delta")
            text = delta.get("content") if delta else None
        if text:
            record.token_times.append(now)
        reason = choice.get("finish_reason")
        if reason:
            record.finish_reason = reason
    usage = event.get("usage")
    if usage:
        record.usage_reported = True
        record.output_tokens = int(usage.get("completion_tokens") or 0)
        record.prompt_tokens = usage.get("prompt_tokens")
        details = usage.get("prompt_tokens_details") or {}
        record.cached_prompt_tokens = details.get("cached_tokens")
        record.server_timings = event.get("timings")
    return True


class StreamClient(Protocol):
    """What the runner needs of a protocol's client: one request, its record appended to `out`."""

    async def send(self, agent: int, prompt: str, out: list[RequestRecord], worker: int = 0) -> None: ...


def make_client(endpoint: Endpoint, workload: Workload, timeout_s: float) -> StreamClient:
    """The client for the endpoint's protocol."""
    if endpoint.protocol == "openai":
        return OpenAIStreamClient(endpoint, workload, timeout_s)
    if endpoint.protocol == "ollama":
        from .ollama_client import OllamaStreamClient

        return OllamaStreamClient(endpoint, workload, timeout_s)
    raise ValueError(f"no client for protocol {endpoint.protocol!r}")


class HttpStreamClient:
    """What every protocol's client shares: one streamed POST per request (http_stream),
    the record appended to `out` even when cancelled, every failure turned into
    `record.error` with the server's own words. Subclasses say where, what and how to read.
    """

    path = ""
    accept = ""

    def __init__(self, endpoint: Endpoint, workload: Workload, timeout_s: float) -> None:
        self._endpoint = endpoint
        self._workload = workload
        self._timeout_s = timeout_s
        headers = {"Content-Type": "application/json", "Accept": self.accept, **dict(endpoint.headers)}
        self._target = Target.post(endpoint.base_url.rstrip("/") + self.path, headers)

    def body(self, prompt: str) -> bytes:
        raise NotImplementedError

    def reader(self, record: RequestRecord) -> BodyReader:
        raise NotImplementedError

    async def send(self, agent: int, prompt: str, out: list[RequestRecord], worker: int = 0) -> None:
        """One request, appended to `out` even when cancelled; every failure becomes `record.error`."""
        body = self.body(prompt)
        record = RequestRecord(agent=agent, start=time.perf_counter(), worker=worker)
        try:
            async with asyncio.timeout(self._timeout_s):
                error = await post_stream(self._target, body, self.accept, self.reader(record))
            if error is not None:
                record.error = error
        except TimeoutError:
            record.error = f"timeout after {self._timeout_s:g} s"
        except asyncio.CancelledError:
            record.error = "cancelled: the round was aborted"
            raise
        finally:
            record.end = time.perf_counter()
            if record.error is None and record.output_tokens == 0:
                record.error = "empty response: no tokens"
            out.append(record)


class OpenAIStreamClient(HttpStreamClient):
    """Streams `/v1/completions` or `/v1/chat/completions` (Server-Sent Events)."""

    accept = "text/event-stream"

    def __init__(self, endpoint: Endpoint, workload: Workload, timeout_s: float) -> None:
        self.path = "/v1/chat/completions" if workload.api == "chat" else "/v1/completions"
        super().__init__(endpoint, workload, timeout_s)

    def body(self, prompt: str) -> bytes:
        return request_body(self._workload, self._endpoint, prompt)

    def reader(self, record: RequestRecord) -> BodyReader:
        return SSEReader(record)


class SSEReader:
    """Events of one OpenAI-protocol stream into its record, up to `data: [DONE]`."""

    __slots__ = ("_record", "_splitter", "_done")

    def __init__(self, record: RequestRecord) -> None:
        self._record = record
        self._splitter = SSESplitter()
        self._done = False

    def feed(self, data: bytes, now: float) -> bool:
        for payload in self._splitter.feed(data):
            if payload == _DONE:
                self._done = True
            elif not _on_event(payload, now, self._record):
                return False
        return True

    def finish(self) -> None:
        record = self._record
        if not self._done:
            tail = self._splitter.pending[:ERROR_BODY_LIMIT].decode("utf-8", "replace")
            record.error = "stream ended without [DONE]" + (f"; unterminated event: {tail}" if tail else "")
        elif not record.usage_reported:
            record.output_tokens = record.content_chunks
