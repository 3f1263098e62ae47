"""The token-path transport against servers that send exactly the bytes a test scripts.

Every way an HTTP exchange can go wrong ends in one message naming it, the
body reaches the reader intact however the network splits it, and the reader
gets the time each read arrived.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trustme
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_swarm.client.transport import ERROR_BODY_LIMIT, Pool, Target

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"


class Collect:
    """A reader that keeps what it was given; `stop_after` reads, it asks to stop."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.reads: list[tuple[bytes, float]] = []
        self.finished = False
        self.stop_after = stop_after

    def feed(self, data: bytes, now: float) -> bool:
        self.reads.append((data, now))
        return self.stop_after is None or len(self.reads) < self.stop_after

    def finish(self) -> None:
        self.finished = True

    @property
    def body(self) -> bytes:
        return b"".join(data for data, _ in self.reads)


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    return head + await reader.readexactly(length)


def _replies(*parts: bytes, close: bool = True, pause_s: float = 0.0) -> Script:
    """A server script: read the request, send each part (pausing between), then close or hold."""

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        for part in parts:
            writer.write(part)
            await writer.drain()
            await asyncio.sleep(pause_s)
        if close:
            writer.close()
        else:
            await reader.read()  # until the client hangs up

    return script


def _exchange(script: Script, reader: Collect, accept: str = "text/event-stream", timeout_s: float = 5.0) -> str | None:
    """Run one exchange against `script` (waiting up to 1 s for the script to end); the transport's failure."""

    async def main() -> str | None:
        handlers: list[asyncio.Task[None]] = []

        async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None  # a handler runs in its own task
            handlers.append(task)
            await script(r, w)

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        target = Target.post(f"http://127.0.0.1:{port}/v1/completions", {"Content-Type": "application/json"})
        async with server:
            try:
                async with asyncio.timeout(timeout_s):
                    return await Pool(keep_alive=False).post(target, b'{"prompt": "x"}', accept, reader)
            finally:
                if handlers:
                    await asyncio.wait(handlers, timeout=1.0)

    return asyncio.run(main())


def _chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def test_the_request_is_a_plain_http11_post_with_length_and_headers() -> None:
    target = Target.post("https://user@api.example.com:8443/proxy/v1/completions?x=1", {"Authorization": "Bearer k"})
    request = target.request(b"{}")
    head, _, body = request.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /proxy/v1/completions?x=1 HTTP/1.1"
    assert b"Host: api.example.com:8443" in lines and b"Authorization: Bearer k" in lines
    assert b"Content-Length: 2" in lines and b"Connection: close" not in lines, "kept alive: HTTP/1.1's default"
    assert body == b"{}"
    assert b"Connection: close" in target.request(b"{}", close=True).split(b"\r\n")
    assert (target.host, target.port, target.tls is not None) == ("api.example.com", 8443, True)
    assert "Bearer" not in repr(target), "the head (with any key) stays out of repr()"


@pytest.mark.parametrize(
    ("url", "headers", "words"),
    [
        ("ftp://host/x", {}, "not an http(s) URL"),
        ("http:///nohost", {}, "not an http(s) URL"),
        ("http://h/x", {"X-Key": "a\r\nInjected: 1"}, "line break"),
        ("http://h/x", {"X:Key": "a"}, "line break or a colon"),
    ],
)
def test_a_bad_url_or_header_is_refused_before_anything_is_sent(url: str, headers: dict[str, str], words: str) -> None:
    with pytest.raises(ValueError, match=re.escape(words)):
        Target.post(url, headers)


def test_a_chunked_stream_reaches_the_reader_with_one_timestamp_per_read() -> None:
    reader = Collect()
    before = time.perf_counter()
    error = _exchange(
        _replies(
            SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n",
            *(b"9\r\n%s\r\n" % (b"data: %d\n\n" % i) for i in range(3)),
            b"0\r\n\r\n",
            pause_s=0.02,
        ),
        reader,
    )
    assert error is None and reader.finished
    assert reader.body == b"data: 0\n\ndata: 1\n\ndata: 2\n\n"
    times = [now for _, now in reader.reads]
    assert before < times[0] and times == sorted(times) and time.perf_counter() > times[-1]
    assert times[-1] - times[0] >= 0.03, "reads 20 ms apart carry their own arrival times"


def test_a_body_framed_by_content_length_or_by_the_connection_closing_is_whole() -> None:
    body = b"data: 1\n\ndata: [DONE]\n\n"
    for head in (SSE_HEAD + b"Content-Length: %d\r\n\r\n" % len(body), SSE_HEAD + b"Connection: close\r\n\r\n"):
        reader = Collect()
        error = _exchange(_replies(head + body), reader)
        assert error is None and reader.finished and reader.body == body


def test_a_chunked_stream_cut_midway_ends_and_lets_the_reader_say_what_is_missing() -> None:
    reader = Collect()
    error = _exchange(
        _replies(SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + b"9\r\ndata: 1\n\n\r\n" + b'20\r\ndata: {"cho'),
        reader,
    )
    assert error is None, "the reader records what the stream lacked"
    assert reader.finished and reader.body.startswith(b"data: 1\n\n")


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        (
            b'HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: 27\r\n\r\n{"error": "loading model"}\n',
            'HTTP 503: {"error": "loading model"}',
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: 18\r\n\r\n<html>proxy</html>",
            "not a stream (content type 'text/html'): <html>proxy</html>",
        ),
        (b"SSH-2.0-OpenSSH_9.6\r\n", "malformed HTTP response: "),
        (b"", "connection closed before the response"),
    ],
)
def test_every_failed_exchange_is_one_message_that_says_what_happened(reply: bytes, words: str) -> None:
    reader = Collect()
    error = _exchange(_replies(reply), reader)
    assert error is not None and error.startswith(words), error
    assert reader.reads == [] and not reader.finished


def test_an_error_body_is_cut_to_the_limit() -> None:
    body = b"x" * 10_000
    error = _exchange(_replies(b"HTTP/1.1 500 Oops\r\nContent-Length: %d\r\n\r\n" % len(body) + body), Collect())
    assert error == "HTTP 500: " + "x" * ERROR_BODY_LIMIT


def test_a_refused_connection_names_the_cause() -> None:
    async def main() -> str | None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        return await Pool(keep_alive=False).post(
            Target.post(f"http://127.0.0.1:{port}/", {}), b"{}", "text/event-stream", Collect()
        )

    error = asyncio.run(main())
    assert error is not None and error.startswith("ConnectionRefusedError: "), error


def test_a_reader_that_stops_closes_the_connection_at_once() -> None:
    reader = Collect(stop_after=1)
    hung_up: list[bool] = []

    async def script(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await _read_request(r)
        w.write(SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + b"9\r\ndata: 1\n\n\r\n")
        await w.drain()
        hung_up.append(await r.read() == b"")  # returns when the client hangs up

    error = _exchange(script, reader, timeout_s=2.0)
    assert error is None and len(reader.reads) == 1 and not reader.finished
    assert hung_up == [True]


def test_a_cancelled_exchange_hangs_up_and_leaves_the_reader_alone() -> None:
    closed: list[bool] = []
    reader = Collect()

    async def script(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await _read_request(r)
        w.write(SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n")
        await w.drain()
        closed.append(await r.read() == b"")

    async def main() -> None:
        server = await asyncio.start_server(script, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.3):
                    await Pool(keep_alive=False).post(
                        Target.post(f"http://127.0.0.1:{port}/", {}), b"{}", "text/event-stream", reader
                    )
            for _ in range(100):
                if closed:
                    break
                await asyncio.sleep(0.01)

    asyncio.run(main())
    assert closed == [True], "the server saw the client hang up"
    assert not reader.finished, "a timed-out request's record is final: the connection's end must not touch it"


@settings(max_examples=60, deadline=None)
@given(
    events=st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=8),
    cuts=st.lists(st.integers(min_value=1, max_value=500), max_size=12),
)
def test_the_body_arrives_intact_however_the_network_splits_it(events: list[bytes], cuts: list[int]) -> None:
    wire = SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + _chunked(*events)
    points = sorted({c for c in cuts if c < len(wire)})
    parts = [wire[a:b] for a, b in zip([0, *points], [*points, len(wire)], strict=True)]
    reader = Collect()
    error = _exchange(_replies(*parts, close=False, pause_s=0.001), reader)
    assert error is None and reader.finished
    assert reader.body == b"".join(events)


def test_an_https_endpoint_is_verified_against_the_systems_trust(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """External endpoints speak TLS; an unknown issuer is refused by name, one trusted through SSL_CERT_FILE streams."""
    ca = trustme.CA()
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server_tls)
    body = b"data: 1\n\ndata: [DONE]\n\n"

    async def exchange() -> tuple[str | None, Collect]:
        reader = Collect()
        server = await asyncio.start_server(
            _replies(SSE_HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body), "127.0.0.1", 0, ssl=server_tls
        )
        port = server.sockets[0].getsockname()[1]
        async with server:
            target = Target.post(f"https://localhost:{port}/v1/completions", {})
            return await asyncio.wait_for(
                Pool(keep_alive=False).post(target, b"{}", "text/event-stream", reader), 10
            ), reader

    error, reader = asyncio.run(exchange())
    assert (
        error is not None and error.startswith("SSLCertVerificationError: ") and "CERTIFICATE_VERIFY_FAILED" in error
    ), error

    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    error, reader = asyncio.run(exchange())
    assert error is None and reader.finished and reader.body == body
