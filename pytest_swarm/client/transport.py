"""One streamed HTTP/1.1 POST on an asyncio protocol, over kept-alive connections: the transport under every token.

llhttp parses inside `data_received` and each read is timestamped as the loop hands it over: no task switch between
the socket and the clock. Each event loop has one Pool of kept-alive connections. A request is resent once, on a
fresh connection, only when an idle connection the server had just closed answered not a byte (`Pool.retries`). Why
not aiohttp, and how servers drop idle connections: docs/harness.md."""

from __future__ import annotations

import asyncio
import errno
import ssl
import time
from dataclasses import dataclass, field
from typing import Protocol, cast
from urllib.parse import urlsplit

import httptools

from .._util.open_files import limit_words

ERROR_BODY_LIMIT = 500
"""Bytes of a non-stream answer kept for the failure message."""
_clock = time.perf_counter
_CLOSE = b"Connection: close\r\n"
_RESENT = " (sent again on a fresh connection: the server had closed the kept one unanswered)"


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
        lines = [f"POST {path} HTTP/1.1", f"Host: {parts.netloc.rpartition('@')[2]}", "User-Agent: pytest-swarm"]
        for name, value in headers.items():
            if any(c in name + value for c in "\r\n\0") or ":" in name:
                raise ValueError(f"header {name!r} holds a line break or a colon in its name: refused")
            lines.append(f"{name}: {value}")
        return cls(parts.hostname, port, ("\r\n".join(lines) + "\r\n").encode("latin-1"), tls)

    @property
    def key(self) -> tuple[str, int, bool]:
        """Which connections can carry this request: same host, port and TLS or not."""
        return self.host, self.port, self.tls is not None

    def request(self, body: bytes, close: bool = False) -> bytes:
        """The whole request; `close` asks the server to close the connection after its answer."""
        return self.head + (_CLOSE if close else b"") + b"Content-Length: %d\r\n\r\n" % len(body) + body


class Pool:
    """One generator's connections, idle ones kept by server. One per event loop; `keep_alive` False closes each after
    use."""

    def __init__(self, keep_alive: bool = True) -> None:
        self.keep_alive = keep_alive
        self.opened = 0
        """Connections opened so far."""
        self.retries = 0
        """Requests sent a second time, on a fresh connection, because their kept one was found closed unanswered."""
        self._idle: dict[tuple[str, int, bool], list[_Connection]] = {}

    async def post(self, target: Target, body: bytes, accept: str, reader: BodyReader) -> str | None:
        """Send one request and feed a 200 answer to `reader`; the exchange's failure message, if any. Cancellation
        propagates."""
        loop = asyncio.get_running_loop()
        request = target.request(body, close=not self.keep_alive)
        idle = self._idle.setdefault(target.key, [])
        fresh = False  # True for the one resend: never on a kept connection again
        while True:
            connection = None if fresh else _take(idle)
            reused = connection is not None
            if connection is None:
                try:
                    _, connection = await loop.create_connection(_Connection, target.host, target.port, ssl=target.tls)
                except OSError as exc:
                    return _connect_failure(exc) + (_RESENT if fresh else "")
                self.opened += 1
            done: asyncio.Future[str | None] = loop.create_future()
            connection.start(request, accept, reader, done)
            try:
                error = await done
            except BaseException:
                connection.close()
                raise
            if connection.reusable and self.keep_alive:
                idle.append(connection)
            else:
                connection.close()
            if not (reused and connection.unanswered):
                return error + _RESENT if fresh and error is not None else error
            self.retries += 1
            fresh = True

    def close(self) -> None:
        """Close every idle connection (the generator is done with its server)."""
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()


def _take(idle: list[_Connection]) -> _Connection | None:
    """The idle connection used last (the least likely to have timed out), skipping any the server closed meanwhile."""
    while idle:
        connection = idle.pop()
        if connection.open:
            return connection
    return None


def _connect_failure(exc: OSError) -> str:
    """A failed connect as the record says it; out of descriptors, it names the limit."""
    text = f"{type(exc).__name__}: {exc}"
    return text + f" ({limit_words()})" if exc.errno == errno.EMFILE else text


class _Connection(asyncio.Protocol):
    """One connection and the exchange on it now: parser callbacks (httptools calls `on_*` during `feed_data`) and the
    connection's end."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._lost = False
        self._ended = True  # no exchange on it yet
        self.reusable = False
        """The last answer was read to its end and the server keeps the connection."""
        self.unanswered = False
        """The connection closed during an exchange before any byte of the answer came."""
        self._accept = ""
        self._reader: BodyReader | None = None
        self._done: asyncio.Future[str | None] | None = None
        self._now = 0.0
        self._content_type = ""
        self._status = 0
        self._streaming = False
        self._error_body = b""

    @property
    def open(self) -> bool:
        transport = self._transport
        return not self._lost and transport is not None and not transport.is_closing()

    def start(self, request: bytes, accept: str, reader: BodyReader, done: asyncio.Future[str | None]) -> None:
        """Send `request` and read its answer into `reader`; `done` gets the failure, or None."""
        self._accept = accept
        self._reader = reader
        self._feed = reader.feed
        self._done = done
        self._ended = False
        self.reusable = self.unanswered = False
        self._parser = httptools.HttpResponseParser(self)
        self._parse = self._parser.feed_data
        self._now = 0.0  # stays 0.0 until the answer's first byte: then the request is never sent again
        self._content_type = ""
        self._status = 0
        self._streaming = False
        self._error_body = b""
        assert self._transport is not None  # create_connection made it before handing the protocol over
        self._transport.write(request)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's

    def data_received(self, data: bytes) -> None:
        if self._ended:
            self.close()  # bytes with no exchange on: out of step with the server, never used again
            return
        self._now = _clock()
        try:
            self._parse(data)
        except httptools.HttpParserError as exc:
            if not self._ended:
                self._end(f"malformed HTTP response: {exc}; first bytes: {data[:80]!r}")
            else:
                self.close()  # bytes past a complete answer that are not HTTP

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self.reusable = False
        if self._ended:
            return
        if not self._status:
            self.unanswered = self._now == 0.0
            self._end("connection closed before the response" + (f": {exc}" if exc else ""))
        else:
            self._complete()  # a body framed by the connection's end, or cut short: the reader says which

    # httptools callbacks

    def on_message_begin(self) -> None:
        if self._ended:
            self.close()  # a second answer after the one asked for: out of step

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
            self.reusable = self._parser.should_keep_alive()  # the whole answer is read: kept if the server keeps it
            self._complete()

    # ending

    def _complete(self) -> None:
        if self._streaming:
            assert self._reader is not None  # streaming only within an exchange
            self._reader.finish()
            self._end(None)
            return
        text = self._error_body[:ERROR_BODY_LIMIT].decode("utf-8", "replace")
        if self._status != 200:
            self._end(f"HTTP {self._status}: {text}")
        else:
            self._end(f"not a stream (content type {self._content_type.partition(';')[0].strip()!r}): {text}")

    def _end(self, error: str | None) -> None:
        done = self._done
        if done is not None and not done.done():  # a cancelled request's future is done already
            done.set_result(error)
        if self.reusable:
            self._ended = True
            self._streaming = False
        else:
            self.close()

    def close(self) -> None:
        """Hang up; from here on nothing reaches the reader (a cancelled request's record is final)."""
        self._ended = True
        self._streaming = False
        self.reusable = False
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()
