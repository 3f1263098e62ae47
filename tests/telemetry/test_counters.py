"""Prefix-cache counters around rounds, through the one /metrics reader: a server without them is asked once per item,
one with them before and after every round."""

from __future__ import annotations

import asyncio
import collections

import pytest
from aiohttp import web

from pytest_swarm.engines.vllm_served import PREFIX_CACHE_SERIES
from pytest_swarm.telemetry.counters import RoundCounters, ServerProbe, Watched

COUNTERS = "vllm:prefix_cache_queries_total {}\nvllm:prefix_cache_hits_total {}\n"


def test_a_server_without_counters_is_asked_once_and_one_with_them_every_round() -> None:
    asked: collections.Counter[str] = collections.Counter()

    async def metrics(request: web.Request) -> web.Response:
        asked[request.path] += 1
        if request.path == "/with/metrics":
            queries = 10 * asked[request.path]  # 10 queries, 4 hits a read
            return web.Response(text=COUNTERS.format(queries, 0.4 * queries), content_type="text/plain")
        return web.Response(status=404, text="not found")

    async def main() -> list[Watched]:
        app = web.Application()
        app.router.add_get("/{server}/metrics", metrics)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            probes = [
                ServerProbe(f"http://127.0.0.1:{port}/with", series=PREFIX_CACHE_SERIES),
                None,
                ServerProbe(f"http://127.0.0.1:{port}/without", series=PREFIX_CACHE_SERIES),
                ServerProbe(f"http://127.0.0.1:{port}/with"),  # an engine that names no counters is never asked
            ]
            rounds = []
            async with RoundCounters(probes) as counters:
                for _ in range(4):
                    await counters.begin()
                    rounds.append(await counters.end())
            return rounds
        finally:
            await runner.cleanup()

    rounds = asyncio.run(main())
    for round_ in rounds:  # each server's increase over its own reads: the server without counters adds nothing
        assert round_.server_counters is not None
        assert round_.server_counters == {"prefix_cache_queries": 10.0, "prefix_cache_hits": pytest.approx(4.0)}
        assert round_.clock_unread is not None and "/without/metrics answered HTTP 404" in round_.clock_unread
    assert asked == {"/with/metrics": 8, "/without/metrics": 1}, "the probe naming no counters sent nothing"
