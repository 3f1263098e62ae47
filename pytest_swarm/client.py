"""The streaming OpenAI-protocol client that produces one RequestRecord per request.

aiohttp reading raw chunks, our own SSE split and orjson: about an order of
magnitude less client CPU per token than httpx or the openai SDK (see DESIGN.md),
so the harness measures the server and not itself. Timestamps are taken once per
network read; only what a figure needs is pulled out of each event.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
import orjson

from .records import RequestRecord
from .spec import Workload
from .sse import SSESplitter

_DONE = b"[DONE]"
_ERROR_BODY_LIMIT = 500


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


def _content_of(event: dict[str, Any]) -> str | None:
    choices = event.get("choices")
    if not choices:
        return None
    choice = choices[0]
    if "text" in choice:
        return choice["text"]
    delta = choice.get("delta")
    return delta.get("content") if delta else None


def _finish_reason(event: dict[str, Any]) -> str | None:
    choices = event.get("choices")
    return choices[0].get("finish_reason") if choices else None


def _apply_usage(record: RequestRecord, usage: dict[str, Any]) -> None:
    record.usage_reported = True
    record.output_tokens = int(usage.get("completion_tokens") or 0)
    record.prompt_tokens = usage.get("prompt_tokens")
    details = usage.get("prompt_tokens_details") or {}
    record.cached_prompt_tokens = details.get("cached_tokens")


class StreamClient(Protocol):
    """What the runner needs of a protocol's client: one request, its record appended to `out`."""

    async def send(self, agent: int, prompt: str, out: list[RequestRecord], worker: int = 0) -> None: ...


def make_client(session: aiohttp.ClientSession, endpoint: Endpoint, workload: Workload, timeout_s: float) -> StreamClient:
    """The client for the endpoint's protocol."""
    if endpoint.protocol == "openai":
        return OpenAIStreamClient(session, endpoint, workload, timeout_s)
    if endpoint.protocol == "ollama":
        from .ollama_client import OllamaStreamClient

        return OllamaStreamClient(session, endpoint, workload, timeout_s)
    raise ValueError(f"no client for protocol {endpoint.protocol!r}")


class HttpStreamClient:
    """What every protocol's client shares: one POST per request over one aiohttp session,
    the record appended to `out` even when cancelled, every failure turned into
    `record.error` with the server's own words. Subclasses say where, what and how to read.
    """

    path = ""
    accept = ""

    def __init__(self, session: aiohttp.ClientSession, endpoint: Endpoint, workload: Workload, timeout_s: float) -> None:
        self._session = session
        self._endpoint = endpoint
        self._workload = workload
        self._url = endpoint.base_url.rstrip("/") + self.path
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._headers = {"Content-Type": "application/json", "Accept": self.accept, **dict(endpoint.headers)}

    def body(self, prompt: str) -> bytes:
        raise NotImplementedError

    async def read(self, response: aiohttp.ClientResponse, record: RequestRecord) -> None:
        raise NotImplementedError

    async def send(self, agent: int, prompt: str, out: list[RequestRecord], worker: int = 0) -> None:
        """One request, appended to `out` even when cancelled; every failure becomes `record.error`."""
        body = self.body(prompt)
        record = RequestRecord(agent=agent, start=time.perf_counter(), worker=worker)
        try:
            async with self._session.post(self._url, data=body, headers=self._headers, timeout=self._timeout) as response:
                if response.status != 200:
                    text = (await response.read())[:_ERROR_BODY_LIMIT].decode("utf-8", "replace")
                    record.error = f"HTTP {response.status}: {text}"
                elif not response.content_type.startswith(self.accept):
                    text = (await response.read())[:_ERROR_BODY_LIMIT].decode("utf-8", "replace")
                    record.error = f"not a stream (content type {response.content_type!r}): {text}"
                else:
                    await self.read(response, record)
        except asyncio.TimeoutError:
            record.error = f"timeout after {self._timeout.total:g} s"
        except aiohttp.ClientError as exc:
            record.error = f"{type(exc).__name__}: {exc}"
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

    def __init__(self, session: aiohttp.ClientSession, endpoint: Endpoint, workload: Workload, timeout_s: float) -> None:
        self.path = "/v1/chat/completions" if workload.api == "chat" else "/v1/completions"
        super().__init__(session, endpoint, workload, timeout_s)

    def body(self, prompt: str) -> bytes:
        return request_body(self._workload, self._endpoint, prompt)

    async def read(self, response: aiohttp.ClientResponse, record: RequestRecord) -> None:
        splitter = SSESplitter()
        done = False
        async for chunk in response.content.iter_any():
            now = time.perf_counter()
            for payload in splitter.feed(chunk):
                if payload == _DONE:
                    done = True
                    continue
                if not self._on_event(payload, now, record):
                    return
        if not done:
            tail = splitter.pending[:_ERROR_BODY_LIMIT].decode("utf-8", "replace")
            record.error = "stream ended without [DONE]" + (f"; unterminated event: {tail}" if tail else "")
        elif not record.usage_reported:
            record.output_tokens = record.content_chunks

    @staticmethod
    def _on_event(payload: bytes, now: float, record: RequestRecord) -> bool:
        """Apply one event to the record; False stops the stream on a server error."""
        try:
            event = orjson.loads(payload)
        except orjson.JSONDecodeError:
            record.error = "malformed event: " + payload[:_ERROR_BODY_LIMIT].decode("utf-8", "replace")
            return False
        if not isinstance(event, dict):
            record.error = "malformed event: " + payload[:_ERROR_BODY_LIMIT].decode("utf-8", "replace")
            return False
        if "error" in event or event.get("object") == "error":
            # {"error": {...}} from current vLLM and llama.cpp; a bare ErrorResponse
            # ({"object": "error", "message": ...}) from vLLM before 0.10.
            detail = event["error"] if "error" in event else event
            record.error = "server error: " + orjson.dumps(detail).decode()[:_ERROR_BODY_LIMIT]
            return False
        if _content_of(event):
            record.token_times.append(now)
        reason = _finish_reason(event)
        if reason:
            record.finish_reason = reason
        usage = event.get("usage")
        if usage:
            _apply_usage(record, usage)
            record.server_timings = event.get("timings")
        return True
