"""What every protocol's client shares: where requests go, the StreamClient protocol the load
stage drives, and one streamed POST per request with its record always kept.

An asyncio protocol with llhttp underneath (transport.py), each protocol's own
stream reader and orjson: a fraction of the client CPU per token of httpx, the
openai SDK or even aiohttp (benchmarks/harness_overhead.py), so the harness
measures the server and not itself. Timestamps are taken once per network read,
as the loop hands the bytes over; only what a figure needs is pulled out of each
event.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Protocol

from ..records import RequestRecord
from ..specs import Workload
from .transport import BodyReader, Target, post_stream

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


class StreamClient(Protocol):
    """What the runner needs of a protocol's client: one request, its record appended to `out`."""

    async def send(self, agent: int, prompt: str, out: list[RequestRecord], worker: int = 0) -> None: ...


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
