"""What every protocol's client shares; cheap per token, so the harness measures the server, not itself
(docs/harness.md)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Literal, Protocol

from ..core.records import AnswerParts, Asked, RequestRecord, Schedule
from .deadlines import Deadlines
from .transport import BodyReader, Pool, Target

PROTOCOLS = ("openai", "ollama")
"""The streaming protocols a client exists for."""


Pinning = Literal["ignore_eos", "generation_config"]
"""How a server is asked for an answer of exactly `max_tokens` (Endpoint.pinning)."""


@dataclass(frozen=True)
class Endpoint:
    """Where requests go, in which protocol, under which model name. `headers` (an API key) never reach a report or
    repr()."""

    base_url: str
    model: str
    protocol: str = "openai"
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    pinning: Pinning = "ignore_eos"
    """How a pinned answer's length is asked of an OpenAI-protocol server: `ignore_eos` (vLLM, llama.cpp, SGLang), or
    `generation_config` (`transformers serve`, which refuses fields it does not know: a generation config whose least
    new tokens is the most)."""
    ends_with_done: bool = True
    """Whether its SSE stream ends with `data: [DONE]`, as OpenAI's does; where not (`transformers serve`), a stream is
    whole once a choice said why it finished, and one cut before that still fails."""


@dataclass(frozen=True, slots=True)
class Request:
    """One request: its `path`, its `body` (built before its clock starts) and its place in the swarm; `keep_text` keeps
    the answer for a next turn."""

    agent: int
    path: str
    body: bytes
    worker: int = 0
    session: int = 0
    turn: int = 0
    max_tokens: int | None = None
    prompt_tokens: int | None = None
    """prompt_tokens=: the length in the server's tokens the prompt was built to."""
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
            asked=Asked(self.max_tokens, self.prompt_tokens),
        )


class StreamClient(Protocol):
    """What the runner needs of a protocol's client: one request, its record appended to `out` and returned."""

    async def send(self, request: Request, out: list[RequestRecord]) -> RequestRecord: ...


class HttpStreamClient:
    """One streamed POST per request over `pool`; the record reaches `out` even when cancelled, failures in
    `record.error`."""

    paths: tuple[str, ...] = ()
    accept = ""

    def __init__(self, endpoint: Endpoint, timeout_s: float, pool: Pool | None = None) -> None:
        self.pool = pool if pool is not None else Pool()
        self._deadlines = Deadlines(timeout_s)
        headers = {"Content-Type": "application/json", "Accept": self.accept, **dict(endpoint.headers)}
        base = endpoint.base_url.rstrip("/")
        # Every path's request head built (and the URL checked) once, here, not per request.
        self._targets = {path: Target.post(base + path, headers) for path in self.paths}

    def reader(self, record: RequestRecord) -> BodyReader:
        raise NotImplementedError

    async def send(self, request: Request, out: list[RequestRecord]) -> RequestRecord:
        """One request, appended to `out` even when cancelled (and returned); every failure becomes `record.error`."""
        target = self._targets.get(request.path)
        if target is None:
            raise ValueError(f"{type(self).__name__} serves {', '.join(self.paths)}, not {request.path!r}")
        record = request.record()
        deadline = self._deadlines.start()
        try:
            error = await self.pool.post(target, request.body, self.accept, self.reader(record))
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
