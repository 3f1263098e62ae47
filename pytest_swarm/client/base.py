"""What every protocol's client shares: where requests go, the StreamClient protocol the load
stage drives, and one streamed POST per request with its record always kept.

An asyncio protocol with llhttp underneath (transport.py), each protocol's own
stream reader (msgspec for OpenAI events, orjson for Ollama's lines) and one timer
for all request deadlines (deadlines.py): a fraction of the client CPU per token of httpx, the
openai SDK or even aiohttp (benchmarks/harness_overhead.py), so the harness
measures the server and not itself. Timestamps are taken once per network read,
as the loop hands the bytes over; only what a figure needs is pulled out of each
event.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..core.records import AnswerParts, RequestRecord, Schedule, ToolExchange
from ..specs import Workload
from .deadlines import Deadlines
from .transport import BodyReader, Pool, Target

PROTOCOLS = ("openai", "ollama")
"""The streaming protocols a client exists for."""


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


Messages = tuple[tuple[str, str] | ToolExchange, ...]
"""A chat conversation as (role, content) pairs, and the tool calls an answer made with their results (ToolExchange):
hashable and cheap to pickle to a load generator. Each protocol's client spells a ToolExchange as its engine
documents."""


@dataclass(frozen=True, slots=True)
class Request:
    """One request as the load stage asks for it: what to send, and where it sits in the swarm.

    `prompt` is text (completions, or a single user message for chat) or a chat
    conversation; `max_tokens` overrides the workload's (a trace's output length);
    `keep_text` keeps the answer on the record, for a next turn to send back.
    """

    agent: int
    prompt: str | Messages
    worker: int = 0
    session: int = 0
    turn: int = 0
    max_tokens: int | None = None
    scheduled: float | None = None
    released: float | None = None
    keep_text: bool = False

    def record(self) -> RequestRecord:
        """A fresh record for this request, started now."""
        return RequestRecord(
            agent=self.agent,
            start=time.perf_counter(),
            worker=self.worker,
            session=self.session,
            turn=self.turn,
            schedule=None if self.scheduled is None else Schedule(self.scheduled, self.released),
            parts=AnswerParts(text=[] if self.keep_text else None),
            asked_tokens=self.max_tokens,
        )


def messages_of(prompt: str | Messages) -> list[dict[str, Any]]:
    """The OpenAI chat API's `messages`: a bare prompt is one user message; a tool exchange is the assistant's message
    with its `tool_calls`, then one `role: "tool"` message per call, naming the call's id (as agent frameworks send
    it)."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    messages: list[dict[str, Any]] = []
    for message in prompt:
        if not isinstance(message, ToolExchange):
            messages.append({"role": message[0], "content": message[1]})
            continue
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.calls
        ]
        messages.append({"role": "assistant", "content": message.content or None, "tool_calls": calls})
        messages += [
            {"role": "tool", "tool_call_id": c.id, "content": result}
            for c, result in zip(message.calls, message.results, strict=True)
        ]
    return messages


class StreamClient(Protocol):
    """What the runner needs of a protocol's client: one request, its record appended to `out` and returned."""

    async def send(self, request: Request, out: list[RequestRecord]) -> RequestRecord: ...


class HttpStreamClient:
    """What every protocol's client shares: one streamed POST per request (transport.py),
    the record appended to `out` even when cancelled, every failure turned into
    `record.error` with the server's own words. Subclasses say where, what and how to read.

    Requests go over `pool`'s kept-alive connections: one pool per event loop, shared by
    the loop's clients, so the round can say how many connections it opened. Without
    one the client keeps a pool of its own.
    """

    path = ""
    accept = ""

    def __init__(self, endpoint: Endpoint, workload: Workload, timeout_s: float, pool: Pool | None = None) -> None:
        self.pool = pool if pool is not None else Pool()
        self._endpoint = endpoint
        self._workload = workload
        self._deadlines = Deadlines(timeout_s)
        self._headers = {"Content-Type": "application/json", "Accept": self.accept, **dict(endpoint.headers)}
        self._target = Target.post(endpoint.base_url.rstrip("/") + self.path, self._headers)

    def body(self, request: Request) -> bytes:
        raise NotImplementedError

    def reader(self, record: RequestRecord) -> BodyReader:
        raise NotImplementedError

    def target(self, request: Request) -> Target:
        """Where the request goes: one path per client, but Ollama's chat conversations have their own."""
        return self._target

    async def send(self, request: Request, out: list[RequestRecord]) -> RequestRecord:
        """One request, appended to `out` even when cancelled (and returned); every failure becomes `record.error`."""
        body = self.body(request)
        record = request.record()
        deadline = self._deadlines.start()
        try:
            error = await self.pool.post(self.target(request), body, self.accept, self.reader(record))
            if error is not None:
                record.error = error
        except asyncio.CancelledError:
            if not deadline.expired():
                record.error = "cancelled: the round was aborted"
                raise
            record.error = f"timeout after {self._deadlines.timeout_s:g} s"
        finally:
            deadline.end()
            record.end = time.perf_counter()
            if record.error is None and (record.output_tokens == 0 or not record.token_times):
                record.error = "empty response: no token of any kind (answer text, reasoning or tool call)"
            out.append(record)
        return record
