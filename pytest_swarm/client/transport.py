"""One streamed HTTP/1.1 POST on an asyncio protocol: the transport under every token.

Why not aiohttp here: its StreamReader wakes the reading task once per network
read, and that wake-up alone cost about 10 µs per token at 256 streams on a
2-core VM, more than the whole budget (benchmarks/harness_overhead.py). Here the
response is parsed by llhttp (httptools, the parser of Node.js and uvicorn)
inside `data_received`, and each read's bytes go to the protocol's reader with
one timestamp, taken the moment the event loop hands them over: no task switch
between the socket and the clock. One connection per request, closed after it:
servers drop idle keep-alive connections at will (llama.cpp after every streamed
answer), and a pooled connection that died meanwhile would fail a request the
server never saw.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from dataclasses import dataclass, field
from typing import Protocol, cast
from urllib.parse import urlsplit

import httptools

ERROR_BODY_LIMIT = 500
"""Bytes of a non-stream answer kept for the failure message."""
_clock = time.perf_counter


class BodyReader(Protocol):
    """A protocol's incremental reader of a streamed answer (SSE, NDJSON), writing into its record."""

    def feed(self, data: bytes, now: float) -> bool:
        """Take the bytes of one network read, received at `now`; False stops the stream (a fault)."""
        ...

    def finish(self) -> None:
        """The body ended (or the connection did): record what is missing."""
        ...


@dataclass(frozen=True)
class Target:
    """Where one kind of request goes: connection details and the request head, built once per client."""

    host: str
    port: int
    head: bytes = field(repr=False)
    tls: ssl.SSLContext | None = field(default=None, repr=False)

    @classmethod
    def post(cls, url: str, headers: dict[str, str]) -> Target:
        """A POST to `url` with `headers` (values checked: a line break would split the request)."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        tls = ssl.create_default_context() if parts.scheme == "https" else None
        port = parts.port or (443 if tls else 80)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        lines = [
            f"POST {path} HTTP/1.1",
            f"Host: {parts.netloc.rpartition('@')[2]}",
            "User-Agent: pytest-swarm",
            "Connection: close",
        ]
        for name, value in headers.items():
            if any(c in name + value for c in "\r\n\0") or ":" in name:
                raise ValueError(f"header {name!r} holds a line break or a colon in its name: refused")
            lines.append(f"{name}: {value}")
        return cls(parts.hostname, port, ("\r\n".join(lines) + "\r\nContent-Length: ").encode("latin-1"), tls)

    def request(self, body: bytes) -> bytes:
        return self.head + b"%d\r\n\r\n" % len(body) + body


async def post_stream(target: Target, body: bytes, accept: str, reader: BodyReader) -> str | None:
    """Send one request and feed a 200 `accept` answer to `reader`; the transport's failure, if any.

    Failures of the exchange itself (refused connection, an HTTP error status, a
    body that is not the stream asked for, a connection closed before the answer,
    bytes that are not HTTP) come back as the message to record; failures inside
    the stream are the reader's to record. Cancellation (a timeout, an aborted
    round) closes the connection and propagates.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[str | None] = loop.create_future()
    exchange = _Exchange(target.request(body), accept, reader, done)
    try:
        await loop.create_connection(lambda: exchange, target.host, target.port, ssl=target.tls)
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"
    try:
        return await done
    finally:
        exchange.close()


class _Exchange(asyncio.Protocol):
    """Parser callbacks (httptools calls `on_*` during `feed_data`) and the connection's end."""

    def __init__(self, request: bytes, accept: str, reader: BodyReader, done: asyncio.Future[str | None]) -> None:
        self._request = request
        self._accept = accept
        self._reader = reader
        self._feed = reader.feed
        self._done = done
        self._ended = False
        self._parser = httptools.HttpResponseParser(self)
        self._parse = self._parser.feed_data
        self._transport: asyncio.Transport | None = None
        self._now = 0.0
        self._content_type = ""
        self._status = 0
        self._streaming = False
        self._error_body = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's
        self._transport.write(self._request)

    def data_received(self, data: bytes) -> None:
        if self._ended:
            return
        self._now = _clock()
        try:
            self._parse(data)
        except httptools.HttpParserError as exc:
            if not self._ended:
                self._end(f"malformed HTTP response: {exc}; first bytes: {data[:80]!r}")

    def connection_lost(self, exc: Exception | None) -> None:
        if self._ended:
            return
        if not self._status:
            self._end("connection closed before the response" + (f": {exc}" if exc else ""))
        else:
            self._complete()  # a body framed by the connection's end, or cut short: the reader says which

    # httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"content-type":
            self._content_type = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self._status = self._parser.get_status_code()
        mime = self._content_type.partition(";")[0].strip().lower()
        self._streaming = self._status == 200 and mime.startswith(self._accept)

    def on_body(self, body: bytes) -> None:
        # Once per token: `_streaming` turns False when the exchange ends, so one test serves both.
        if self._streaming:
            if not self._feed(body, self._now):
                self._end(None)
        elif not self._ended and len(self._error_body) < ERROR_BODY_LIMIT:
            self._error_body += body

    def on_message_complete(self) -> None:
        if not self._ended:
            self._complete()

    # ending

    def _complete(self) -> None:
        if self._streaming:
            self._reader.finish()
            self._end(None)
            return
        text = self._error_body[:ERROR_BODY_LIMIT].decode("utf-8", "replace")
        if self._status != 200:
            self._end(f"HTTP {self._status}: {text}")
        else:
            self._end(f"not a stream (content type {self._content_type.partition(';')[0].strip()!r}): {text}")

    def _end(self, error: str | None) -> None:
        self._done.set_result(error)
        self.close()

    def close(self) -> None:
        """Hang up; from here on nothing reaches the reader (a cancelled request's record is final)."""
        self._ended = True
        self._streaming = False
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()
