"""A round of agents on one event loop: the deal of prompts to agents, and the agents themselves.

All agents of a round start together; each sends its prompts back to back, and the
round's wall-clock runs from the first send to the last answer. With several
servers (process mode), agent i talks to server i mod N. The same deal and the
same agents run inside each load-generator process (generators.py), so a round
spread over processes sends exactly what one loop would.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..client import StreamClient
from ..records import RequestRecord, RoundRecord
from ..telemetry.hostload import OtherCpuProbe
from ..telemetry.selfcheck import LoopMonitor


class RoundPlayer(Protocol):
    """Who plays a round: this event loop (LocalPlayer) or the load-generator processes (generators.Generators)."""

    async def play(
        self, agents: int, prompts: Sequence[str], boot: int = 0, abort: asyncio.Event | None = None, sink: list[RoundRecord] | None = None
    ) -> RoundRecord:
        """`agents` agents, agent i sending prompts[i::agents]; the record also reaches `sink`, even when interrupted."""
        ...


@dataclass(frozen=True)
class AgentPlan:
    """One agent's part of a round: its id in the round, its server and its prompts in order."""

    agent: int
    worker: int
    prompts: Sequence[str]


def plan_agents(agents: int, servers: int, prompts: Sequence[str]) -> list[AgentPlan]:
    """Agent i sends prompts[i::agents] to server i mod `servers`.

    The one deal every runner uses, so a round spread over processes sends exactly
    what one event loop would, agent by agent.
    """
    return [AgentPlan(i, i % servers, prompts[i::agents]) for i in range(agents)]


async def _agent(client: StreamClient, agent: int, worker: int, prompts: Sequence[str], out: list[RequestRecord]) -> None:
    for prompt in prompts:
        await client.send(agent, prompt, out, worker)


async def run_agents(
    clients: Sequence[StreamClient], plans: Sequence[AgentPlan], records: list[RequestRecord], abort: asyncio.Event | None = None
) -> str | None:
    """Every plan's agent at once, each on clients[plan.worker], records appended to `records`.

    Returns "aborted" when `abort` ended the round early, else None. Aborted or
    cancelled (Ctrl-C), the agents are cancelled first, so their in-flight requests
    reach `records` as failures before this returns or raises.
    """
    tasks = [asyncio.ensure_future(_agent(clients[p.worker], p.agent, p.worker, p.prompts, records)) for p in plans]
    everyone: asyncio.Future[Any] = asyncio.gather(*tasks)
    stop: asyncio.Future[Any] = asyncio.ensure_future(abort.wait() if abort is not None else asyncio.Event().wait())
    aborted = None
    try:
        waiting: list[asyncio.Future[Any]] = [everyone, stop]
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if not everyone.done():
            aborted = "aborted"
    except asyncio.CancelledError:
        aborted = "interrupted"
        raise
    finally:
        stop.cancel()
        if aborted:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return aborted


async def run_round(
    clients: Sequence[StreamClient],
    agents: int,
    prompts: Sequence[str],
    boot: int = 0,
    abort: asyncio.Event | None = None,
    sink: list[RoundRecord] | None = None,
) -> RoundRecord:
    """`agents` agents, agent i sending prompts[i::agents] one after another to clients[i % len(clients)].

    The round ends early when `abort` is set, or when the round itself is cancelled
    (Ctrl-C): the agents are cancelled, their in-flight requests recorded as
    failures, and the partial round still reaches `sink`.
    """
    probe = OtherCpuProbe()
    monitor = LoopMonitor()
    records: list[RequestRecord] = []
    start = time.perf_counter()
    aborted = None
    try:
        aborted = await run_agents(clients, plan_agents(agents, len(clients), prompts), records, abort)
    except asyncio.CancelledError:
        aborted = "interrupted"
        raise
    finally:
        client = monitor.stop()
        round_ = RoundRecord(
            concurrency=agents,
            wall_s=time.perf_counter() - start,
            requests=records,
            boot=boot,
            other_cpu_cores=probe.stop(),
            aborted=aborted,
            client_lag_p99_s=client.lag_p99_s,
            client_cpu_share=client.cpu_share,
            client_bound=client.client_bound,
        )
        if sink is not None:
            sink.append(round_)
    return round_


class LocalPlayer:
    """Plays rounds on this event loop with one client per server."""

    def __init__(self, clients: Sequence[StreamClient]) -> None:
        self._clients = clients

    async def play(
        self, agents: int, prompts: Sequence[str], boot: int = 0, abort: asyncio.Event | None = None, sink: list[RoundRecord] | None = None
    ) -> RoundRecord:
        return await run_round(self._clients, agents, prompts, boot, abort, sink)


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop where installed: less loop overhead per token read, so the client measures the server rather than itself."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
