"""Rounds of agents: a warm-up, then measured rounds, each agent sending back to back.

All agents of a round start together on one event loop (uvloop where installed);
the round's wall-clock runs from the first send to the last answer. With several
servers (process mode), agent i talks to server i mod N. Memory is sampled while
the measured rounds run; a guard breach cancels the round in flight, and what was
measured so far is kept, in-flight requests counted as failures. With
`Load.generators` > 1 the same rounds are played by that many load-generator
processes instead of this loop (loadgen.py); everything else here stays the same.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from .client import Endpoint, StreamClient, make_client
from .hostload import OtherCpuProbe
from .probes import RoundCounters, ServerProbe
from .records import RequestRecord, RoundRecord
from .selfcheck import LoopMonitor
from .spec import Load, Workload
from .telemetry import Guard, MemoryFigures, Sampler

PromptSource = Callable[[int], list[str]]
"""Gives `n` fresh prompts, none seen before in the session."""


@dataclass(frozen=True)
class TelemetrySettings:
    interval_s: float = 0.1
    guard: Guard = Guard()


class RoundPlayer(Protocol):
    """Plays one round (run_round's arguments, less the clients) and returns its record."""

    async def __call__(
        self, agents: int, prompts: Sequence[str], boot: int = 0, abort: asyncio.Event | None = None, sink: list[RoundRecord] | None = None
    ) -> RoundRecord: ...


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
            agents, time.perf_counter() - start, records, boot, probe.stop(), aborted, client.lag_p99_s, client.cpu_share, client.client_bound
        )
        if sink is not None:
            sink.append(round_)
    return round_


@asynccontextmanager
async def _players(endpoints: Sequence[Endpoint], workload: Workload, load: Load) -> AsyncIterator[RoundPlayer]:
    """Who plays the rounds: this event loop, or `load.generators` load-generator processes (started and stopped here)."""
    if load.generators == 1:
        clients = [make_client(e, workload, load.request_timeout_s) for e in endpoints]

        async def play(
            agents: int, prompts: Sequence[str], boot: int = 0, abort: asyncio.Event | None = None, sink: list[RoundRecord] | None = None
        ) -> RoundRecord:
            return await run_round(clients, agents, prompts, boot, abort, sink)

        yield play
        return
    from .loadgen import Generators

    async with Generators(endpoints, workload, load) as generators:
        yield generators.play


async def _run_rounds(
    endpoints: Sequence[Endpoint],
    workload: Workload,
    load: Load,
    take: PromptSource,
    boot: int,
    sampler: Sampler | None,
    sink: list[RoundRecord],
    probes: Sequence[ServerProbe | None] = (),
) -> None:
    abort = asyncio.Event()
    async with RoundCounters(probes) as counters, _players(endpoints, workload, load) as play:
        await counters.reset()  # each level starts from an empty prefix cache, where the server offers a reset
        if load.warmup:
            await play(load.agents, take(load.agents))
        if sampler is not None:
            loop = asyncio.get_running_loop()

            def on_breach(reason: str) -> None:
                loop.call_soon_threadsafe(abort.set)

            sampler.on_breach = on_breach
            sampler.start()
        try:
            for _ in range(load.rounds):
                before = await counters.read()
                round_ = await play(load.agents, take(load.agents * workload.prompts_per_agent), boot, abort, sink)
                round_.server_counters = counters.delta(before, await counters.read())
                if round_.aborted:
                    if round_.aborted == "aborted":  # the guard's abort; a lost load generator gives its own reason
                        round_.aborted = f"round aborted by the guard: {sampler.breached if sampler else 'abort'}"
                    break
        finally:
            if sampler is not None:
                sampler.stop()


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop where installed: less loop overhead per token read, so the client measures the server rather than itself."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run_load(
    endpoints: Sequence[Endpoint],
    workload: Workload,
    load: Load,
    take: PromptSource,
    boot: int = 0,
    telemetry: TelemetrySettings | None = None,
    server_pids: Callable[[], Sequence[int]] = list,
    sink: list[RoundRecord] | None = None,
    probes: Sequence[ServerProbe | None] = (),
) -> tuple[list[RoundRecord], MemoryFigures | None]:
    """Warm-up (not returned) and the measured rounds of one item on one boot, on a fresh event loop.

    With `telemetry`, memory of the process trees rooted at `server_pids()` is sampled
    during the measured rounds. Rounds are appended to `sink` as they finish, so a
    caller that is interrupted (Ctrl-C) still holds the rounds measured so far.
    With `probes` (one per server, None where it has none), the server's prefix cache
    is reset first where it offers that, and its counters are read around each round.
    With `load.generators` > 1 the rounds are played by that many child processes
    (loadgen.py) and merged into the same RoundRecords; prompts, telemetry, the guard
    and the probes stay in this process.
    """
    sampler = None if telemetry is None else Sampler(server_pids, telemetry.interval_s, telemetry.guard)
    rounds = sink if sink is not None else []
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        runner.run(_run_rounds(endpoints, workload, load, take, boot, sampler, rounds, probes))
    return rounds, None if sampler is None else sampler.figures()
