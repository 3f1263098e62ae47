"""Prefix-cache counters around rounds: a server without them is asked once per item, one with them every round."""

from __future__ import annotations

import asyncio
import collections

from aiohttp import web

from pytest_swarm.engines.vllm import PREFIX_CACHE_SERIES
from pytest_swarm.telemetry.counters import RoundCounters, ServerProbe

COUNTERS = "vllm:prefix_cache_queries_total 10.0\nvllm:prefix_cache_hits_total 4.0\n"


def test_a_server_without_counters_is_asked_once_and_one_with_them_every_round() -> None:
    asked: collections.Counter[str] = collections.Counter()

    async def metrics(request: web.Request) -> web.Response:
        asked[request.path] += 1
        if request.path == "/with/metrics":
            return web.Response(text=COUNTERS, content_type="text/plain")
        return web.Response(status=404, text="not found")

    async def main() -> list[list[dict[str, float] | None]]:
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
            async with RoundCounters(probes) as counters:
                return [await counters.read() for _ in range(4)]
        finally:
            await runner.cleanup()

    reads = asyncio.run(main())
    assert reads[0] == [{"prefix_cache_queries": 10.0, "prefix_cache_hits": 4.0}, None, None]
    assert all(read == reads[0] for read in reads)  # positions kept: deltas pair each server with itself
    assert asked == {"/with/metrics": 4, "/without/metrics": 1}, "the probe naming no counters sent nothing"
