"""Kept-alive connections: reused where the server keeps them, closed where it says so, resent once where it dropped one.

Scripted servers on 127.0.0.1 answer each request of each connection as the test
plans it, and count the connections they accepted and the requests they read: what
the pool says it opened must be what the server saw, and no request may reach the
server twice unless the first time went unanswered on a kept connection.
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Callable

import pytest

from pytest_swarm.client import Endpoint, make_client
from pytest_swarm.client.base import HttpStreamClient
from pytest_swarm.client.transport import Pool, Target
from pytest_swarm.core.records import RequestRecord, RoundRecord
from pytest_swarm.figures.summary import summarize
from pytest_swarm.load.rounds import run_load
from pytest_swarm.marker.parse import parse_marker
from pytest_swarm.report.json_report import json_document
from pytest_swarm.results.run import RunReport
from pytest_swarm.run.measuring import connections_words
from pytest_swarm.specs import Load, Workload
from tests.client.test_transport import SSE_HEAD, Collect, _chunked
from tests.factories import TakePlanner, item_result, sweeps_over
from tests.standins import openai_standin

BODY = b"data: 1\n\ndata: [DONE]\n\n"
KEPT = SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + _chunked(b"data: 1\n\n", b"data: [DONE]\n\n")
CLOSING = SSE_HEAD + b"Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n" + _chunked(BODY)
HEAD_ONLY = SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
HOLD = b"hold"
"""A planned reply: send the stream's head, then nothing, until the client hangs up."""

Plan = Callable[[int, int], tuple[bytes, bool]]
"""(connection, request on it) -> (the bytes to answer, close after them)."""


async def _read_request(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    return head + await reader.readexactly(length)


class Scripted:
    """A server answering request r of connection c as `plan(c, r)` says; it counts what it saw."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.connections = 0
        self.requests: list[tuple[int, int]] = []
        self.heads: list[bytes] = []
        self.hung_up: list[int] = []
        """Connections the client closed (the server read their end)."""
        self.url = ""
        self._server: asyncio.Server | None = None
        self._handlers: list[asyncio.Task[None]] = []

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.append(task)
        number = self.connections
        self.connections += 1
        count = 0
        while (request := await _read_request(reader)) is not None:
            self.requests.append((number, count))
            self.heads.append(request)
            reply, close = self.plan(number, count)
            writer.write(HEAD_ONLY if reply == HOLD else reply)
            await writer.drain()
            if close:
                writer.close()
                return
            if reply == HOLD:
                await reader.read()
                break
            count += 1
        self.hung_up.append(number)
        writer.close()

    async def __aenter__(self) -> Scripted:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/v1/completions"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        if self._handlers:
            await asyncio.wait(self._handlers, timeout=1.0)
        self._server.close()
        await self._server.wait_closed()


def _posts(
    plan: Plan, requests: int, pool: Pool | None = None, pause_s: float = 0.0
) -> tuple[list[str | None], list[Collect], Pool, Scripted]:
    """`requests` requests one after another over one pool; their failures, readers, the pool and the server."""
    pool = pool if pool is not None else Pool()

    async def main() -> tuple[list[str | None], list[Collect], Scripted]:
        errors: list[str | None] = []
        readers: list[Collect] = []
        async with Scripted(plan) as server:
            target = Target.post(server.url, {"Content-Type": "application/json"})
            for _ in range(requests):
                readers.append(Collect())
                async with asyncio.timeout(5.0):
                    errors.append(await pool.post(target, b"{}", "text/event-stream", readers[-1]))
                await asyncio.sleep(pause_s)
            pool.close()
        return errors, readers, server

    errors, readers, server = asyncio.run(main())
    return errors, readers, pool, server


def test_a_server_that_keeps_connections_answers_every_request_on_one() -> None:
    errors, readers, pool, server = _posts(lambda c, r: (KEPT, False), 5)
    assert errors == [None] * 5 and all(r.finished and r.body == BODY for r in readers)
    assert (pool.opened, pool.retries, server.connections) == (1, 0, 1)
    assert server.requests == [(0, r) for r in range(5)]
    assert all(b"connection: close" not in head.lower() for head in server.heads), "HTTP/1.1 keeps it by default"


def test_an_answer_saying_connection_close_is_honoured_one_connection_a_request() -> None:
    errors, readers, pool, server = _posts(lambda c, r: (CLOSING, False), 3)
    assert errors == [None] * 3 and all(r.finished for r in readers)
    assert (pool.opened, pool.retries, server.connections) == (3, 0, 3)
    assert server.requests == [(0, 0), (1, 0), (2, 0)], "the client closed each: never a second request on one"
    assert sorted(server.hung_up) == [0, 1, 2]


def test_a_pool_without_keep_alive_asks_for_close_and_opens_one_a_request() -> None:
    errors, _, pool, server = _posts(lambda c, r: (KEPT, False), 3, Pool(keep_alive=False))
    assert errors == [None] * 3 and (pool.opened, server.connections) == (3, 3)
    assert all(b"Connection: close\r\n" in head for head in server.heads)


def test_a_connection_the_server_closed_while_idle_is_not_taken() -> None:
    """llama.cpp's way: each answer whole, then the connection closed; seen closing, it is left, nothing resent."""
    errors, _, pool, server = _posts(lambda c, r: (KEPT, True), 3, pause_s=0.05)
    assert errors == [None] * 3
    assert (pool.opened, pool.retries, server.connections) == (3, 0, 3)
    assert len(server.requests) == 3


def test_a_kept_connection_dropped_unanswered_is_resent_once_on_a_fresh_one_and_counted() -> None:
    """The server reads the second request on the kept connection and closes it without a byte: sent again, once."""
    errors, readers, pool, server = _posts(lambda c, r: (b"", True) if (c, r) == (0, 1) else (KEPT, False), 3)
    assert errors == [None] * 3 and all(r.finished and r.body == BODY for r in readers), "answered once each"
    assert (pool.opened, pool.retries) == (2, 1)
    assert server.requests == [(0, 0), (0, 1), (1, 0), (1, 1)], "the third went on the fresh connection, kept"


def test_a_resent_request_that_fails_again_is_a_failure_not_sent_a_third_time() -> None:
    errors, readers, pool, server = _posts(lambda c, r: (KEPT, False) if (c, r) == (0, 0) else (b"", True), 2)
    assert errors[0] is None
    error = errors[1]
    assert error is not None and error.startswith("connection closed before the response"), error
    assert "sent again on a fresh connection" in error
    assert (pool.opened, pool.retries, server.connections) == (2, 1, 2)
    assert server.requests == [(0, 0), (0, 1), (1, 0)]
    assert not readers[1].finished and readers[1].reads == []


def test_a_fresh_connection_dropped_unanswered_is_a_failure_as_always() -> None:
    errors, _, pool, server = _posts(lambda c, r: (b"", True), 1)
    assert errors[0] is not None and errors[0].startswith("connection closed before the response")
    assert "sent again" not in errors[0]
    assert (pool.opened, pool.retries, server.connections) == (1, 0, 1)


@pytest.mark.parametrize(
    "partial",
    [b"HTTP/1.1 2", HEAD_ONLY + b"9\r\ndata: 1\n\n\r\n"],
    ids=["part-of-the-status-line", "head-and-a-token"],
)
def test_nothing_is_resent_once_a_byte_of_the_answer_came(partial: bytes) -> None:
    errors, readers, pool, server = _posts(lambda c, r: (partial, True) if (c, r) == (0, 1) else (KEPT, False), 2)
    assert (pool.opened, pool.retries, server.connections) == (1, 0, 1)
    assert server.requests == [(0, 0), (0, 1)]
    if partial == b"HTTP/1.1 2":
        assert errors[1] is not None and errors[1].startswith("connection closed before the response")
        assert "sent again" not in errors[1]
    else:
        assert errors[1] is None and readers[1].finished, "a cut stream is the reader's to judge"


def test_an_error_answer_read_to_its_end_leaves_the_connection_kept() -> None:
    error_reply = b"HTTP/1.1 503 Busy\r\nContent-Type: application/json\r\nContent-Length: 6\r\n\r\n{busy}"
    errors, _, pool, _ = _posts(lambda c, r: (error_reply, False) if r == 0 else (KEPT, False), 2)
    assert errors == ["HTTP 503: {busy}", None]
    assert pool.opened == 1


def test_a_stopped_or_cancelled_exchange_closes_its_connection_never_reused() -> None:
    async def main() -> tuple[Pool, Scripted, Collect]:
        pool = Pool()
        stopped = Collect(stop_after=1)
        async with Scripted(lambda c, r: (HOLD, False) if c == 1 else (KEPT, False)) as server:
            target = Target.post(server.url, {})
            assert await pool.post(target, b"{}", "text/event-stream", stopped) is None
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await pool.post(target, b"{}", "text/event-stream", Collect())
            assert await pool.post(target, b"{}", "text/event-stream", Collect()) is None
            pool.close()
        return pool, server, stopped

    pool, server, stopped = asyncio.run(main())
    assert len(stopped.reads) == 1 and not stopped.finished
    assert (pool.opened, pool.retries, server.connections) == (3, 0, 3), "stopped, then cancelled: each closed"
    assert sorted(server.hung_up) == [0, 1, 2]


def test_out_of_descriptors_a_connect_names_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    async def refuse(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EMFILE, "Too many open files")

    async def main() -> str | None:
        monkeypatch.setattr(asyncio.get_running_loop(), "create_connection", refuse)
        return await Pool().post(Target.post("http://127.0.0.1:9/", {}), b"{}", "text/event-stream", Collect())

    error = asyncio.run(main())
    assert error is not None and error.startswith("OSError: [Errno 24] Too many open files")
    assert "open-file limit, soft " in error and "hard " in error


def _rounds(faults: list[str], per_agent: int) -> tuple[list[int | None], list[int | None]]:
    """Two rounds (after a warm-up) of one agent per fault, `per_agent` requests each; the rounds' connection counts."""
    counter = iter(range(10**6))

    def take(n: int) -> list[str]:
        return [f"[req {next(counter)}] {faults[i % len(faults)]}" for i in range(n)]

    load = Load(concurrency=len(faults), rounds=2, request_timeout_s=5.0)
    with openai_standin.serve() as url:
        rounds, _ = run_load(
            [Endpoint(url, "standin")],
            Workload(max_tokens=openai_standin.TOKENS),
            load,
            TakePlanner(take, load, per_agent=per_agent),
        )
    assert all(r.ok for round_ in rounds for r in round_.requests)
    assert [len(r.requests) for r in rounds] == [len(faults) * per_agent] * 2
    return [r.connections_opened for r in rounds], [r.connection_retries for r in rounds]


def test_each_round_counts_the_connections_it_opened() -> None:
    """Against the stand-in (aiohttp keeps connections): the warm-up opens one per agent and the rounds reuse them; a
    server answering `Connection: close` costs one per request."""
    assert _rounds(["ok", "ok"], per_agent=3) == ([0, 0], [0, 0])
    assert _rounds(["close", "close"], per_agent=3) == ([6, 6], [0, 0])


def test_a_client_made_without_a_pool_keeps_one_of_its_own() -> None:
    own = make_client(Endpoint("http://127.0.0.1:9", "m"), 1.0)
    shared = Pool()
    given = make_client(Endpoint("http://127.0.0.1:9", "m", "ollama"), 1.0, shared)
    assert isinstance(own, HttpStreamClient) and isinstance(given, HttpStreamClient)
    assert isinstance(own.pool, Pool) and own.pool is not shared and given.pool is shared


def test_the_json_report_and_the_progress_line_carry_each_rounds_connections() -> None:
    def round_(opened: int | None, retries: int | None) -> RoundRecord:
        record = RequestRecord(0, 1.0, end=2.0, token_times=[1.5], output_tokens=1)
        return RoundRecord(
            concurrency=1, wall_s=1.0, requests=[record], connections_opened=opened, connection_retries=retries
        )

    rounds = [round_(4, 0), round_(0, 0), round_(1, 1), round_(None, None)]
    item = item_result("t.py::t[c1]", "t.py::t", parse_marker((), {"max_tokens": 1}), summarize(rounds, 1))
    (entry,) = json_document(RunReport("box", {}, [item], sweeps_over([item])))["tests"]
    assert entry["client"]["connections_opened"] == [4, 0, 1, None]
    assert entry["client"]["connection_retries"] == [0, 0, 1, None]
    assert [connections_words(r) for r in rounds] == [
        "4 connections opened, ",
        "0 connections opened, ",
        "1 connection opened (1 request resent), ",
        "",
    ]
