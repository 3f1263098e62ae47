"""Rounds of agents: a warm-up, then measured rounds, each agent sending back to back.

All agents of a round start together on one event loop (uvloop where installed);
the round's wall-clock runs from the first send to the last answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

import aiohttp

from .client import Endpoint, OpenAIStreamClient
from .hostload import OtherCpuProbe
from .records import RequestRecord, RoundRecord
from .spec import Load, Workload

PromptSource = Callable[[int], list[str]]
"""Gives `n` fresh prompts, none seen before in the session."""


async def _agent(client: OpenAIStreamClient, agent: int, prompts: Sequence[str]) -> list[RequestRecord]:
    return [await client.send(agent, prompt) for prompt in prompts]


async def run_round(client: OpenAIStreamClient, concurrency: int, prompts: Sequence[str], boot: int = 0) -> RoundRecord:
    """`concurrency` agents, agent i sending prompts[i::concurrency] one after another."""
    probe = OtherCpuProbe()
    start = time.perf_counter()
    per_agent = await asyncio.gather(*(_agent(client, i, prompts[i::concurrency]) for i in range(concurrency)))
    wall = time.perf_counter() - start
    return RoundRecord(concurrency, wall, [r for records in per_agent for r in records], boot, probe.stop())


async def _run_rounds(endpoint: Endpoint, workload: Workload, load: Load, take: PromptSource, boot: int) -> list[RoundRecord]:
    # One connection per request: servers close idle keep-alive connections at will
    # (llama.cpp's does after a streamed answer), and a pooled connection that died
    # meanwhile would fail a request the server never saw. Loopback connects cost
    # microseconds next to a prefill.
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as session:
        client = OpenAIStreamClient(session, endpoint, workload, load.request_timeout_s)
        if load.warmup:
            await run_round(client, load.concurrency, take(load.concurrency))
        per_round = load.concurrency * workload.prompts_per_agent
        return [await run_round(client, load.concurrency, take(per_round), boot) for _ in range(load.rounds)]


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run_load(endpoint: Endpoint, workload: Workload, load: Load, take: PromptSource, boot: int = 0) -> list[RoundRecord]:
    """Warm-up (not returned) and the measured rounds of one item on one boot, on a fresh event loop."""
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(_run_rounds(endpoint, workload, load, take, boot))
