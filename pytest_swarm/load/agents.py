"""A round of agents on one event loop: the deal of sessions to agents, the same in every load-generator process."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..client import Pool, Request
from ..core.records import RequestRecord, RoundConditions, RoundRecord, ToolExchange
from ..specs import Workload
from ..telemetry.hostload import HostLoadProbe
from ..telemetry.selfcheck import LoopMonitor
from .bodies import Sender
from .pacer import Pacer
from .sessions import Answer, SessionPlan, render
from .tools import tool_result


class RoundPlayer(Protocol):
    """Who plays a round: this event loop (LocalPlayer) or the load-generator processes (generators.Generators)."""

    async def play(
        self,
        plans: Sequence[AgentPlan],
        boot: int = 0,
        abort: asyncio.Event | None = None,
        sink: list[RoundRecord] | None = None,
    ) -> RoundRecord:
        """Every plan's agent at once; the record also reaches `sink`, even when interrupted."""
        ...


@dataclass(frozen=True)
class AgentPlan:
    """One agent's part of a round: its id in the round, its server and its sessions in order."""

    agent: int
    worker: int
    sessions: tuple[SessionPlan, ...]


def plan_agents(agents: int, servers: int, sessions: Sequence[SessionPlan]) -> list[AgentPlan]:
    """Agent i plays sessions[i::agents] against server i mod `servers`: the one deal every runner uses."""
    return [AgentPlan(i, i % servers, tuple(sessions[i::agents])) for i in range(agents)]


def concurrency_of(plans: Sequence[AgentPlan]) -> int:
    """The round's closed-loop agents; 0 for an open-loop round, whose concurrency is whatever the server let build
    up."""
    return 0 if plans and plans[0].sessions and plans[0].sessions[0].at is not None else len(plans)


async def _agent(
    sender: Sender,
    workload: Workload,
    plan: AgentPlan,
    out: list[RequestRecord],
    origin: float,
    gate: asyncio.Semaphore | None,
    pacer: Pacer,
) -> None:
    for session in plan.sessions:
        scheduled = released = None
        if session.at is not None:
            scheduled = origin + session.at
            # A session trace's turn, due while its parent (the agent's session before) was still answering: it was
            # released when the answer came, and what it waited is the parent's doing, not the generator's lateness.
            now = time.perf_counter()
            released = now if now > scheduled and session is not plan.sessions[0] else None
            await pacer.until(scheduled)
        if gate is not None:
            held = gate.locked()
            await gate.acquire()
            released = time.perf_counter() if held else released
        try:
            await _session(sender, workload, plan, session, out, scheduled, released)
        finally:
            if gate is not None:
                gate.release()


async def _session(
    sender: Sender,
    workload: Workload,
    plan: AgentPlan,
    session: SessionPlan,
    out: list[RequestRecord],
    scheduled: float | None,
    released: float | None,
) -> None:
    """The session's turns in order, each sending the conversation so far; a failed turn ends it (there is no answer to
    go on from)."""
    answers: list[Answer] = []
    last = session.turns - 1
    for turn in range(session.turns):
        max_tokens = session.turn_tokens[turn] if session.turn_tokens else session.max_tokens
        path, body = sender.bodies(render(workload, session, answers), max_tokens)
        request = Request(
            plan.agent,
            path,
            body,
            plan.worker,
            session.session,
            turn,
            max_tokens,
            session.prompt_tokens if turn == 0 else None,
            scheduled if turn == 0 else None,
            released if turn == 0 else None,
            keep_text=turn < last,
        )
        record = await sender.client.send(request, out)
        if not record.ok or turn == last:
            return
        # The calls an agent framework could run: one whose arguments are not a JSON object (cut by max_tokens,
        # say) is counted as invalid, and not sent back (llama.cpp refuses a conversation holding one: HTTP 500).
        calls = tuple(call for call in record.tool_calls if call.valid)
        if calls:
            results = tuple(tool_result(call, workload.agent.tool_result_tokens) for call in calls)
            answers.append(ToolExchange(calls, results, record.text))
        else:
            answers.append(record.text)
        if session.think_s[turn] > 0:
            await asyncio.sleep(session.think_s[turn])


ARRIVAL_LEAD_S = 0.02
"""How long before its instant an open-loop arrival's task is made: made all at once, they start late
(benchmarks/open_loop_results.txt)."""


async def _arrive(plans: Sequence[AgentPlan], start: float, spawn: Callable[[AgentPlan], asyncio.Future[None]]) -> None:
    """Open loop: each arrival's agent made ARRIVAL_LEAD_S early, in order, then awaited. An agent's exception ends
    the round."""
    waiting = sorted(plans, key=lambda p: p.sessions[0].at or 0.0 if p.sessions else 0.0)
    running: set[asyncio.Future[None]] = set()
    failed: list[BaseException] = []

    def finished(task: asyncio.Future[None]) -> None:
        running.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            failed.append(error)

    next_ = 0
    while next_ < len(waiting) and not failed:
        horizon = time.perf_counter() - start + ARRIVAL_LEAD_S
        while next_ < len(waiting) and (
            not waiting[next_].sessions or (waiting[next_].sessions[0].at or 0.0) <= horizon
        ):
            task = spawn(waiting[next_])
            running.add(task)
            task.add_done_callback(finished)
            next_ += 1
        if next_ < len(waiting):
            await asyncio.sleep(ARRIVAL_LEAD_S / 2)
    while running and not failed:
        await asyncio.wait(list(running), return_when=asyncio.FIRST_EXCEPTION)
    if failed:
        raise failed[0]


async def run_agents(
    senders: Sequence[Sender],
    workload: Workload,
    plans: Sequence[AgentPlan],
    records: list[RequestRecord],
    abort: asyncio.Event | None = None,
    origin: float | None = None,
    max_in_flight: int | None = None,
) -> str | None:
    """Every plan's agent at once, on senders[plan.worker]; open-loop sessions at `origin` plus their offset, at most
    `max_in_flight`. Returns "aborted" when `abort` ended the round; in-flight requests are then recorded as
    failures."""
    start = time.perf_counter() if origin is None else origin
    gate = asyncio.Semaphore(max_in_flight) if max_in_flight is not None else None
    pacer = Pacer()  # open-loop arrivals wake at their instants, not on the loop's next millisecond
    # What was alive before the round stays out of the round's garbage collections: a full
    # collection of a pytest process's heap (pytest, scipy, the reports) held the event loop
    # 50-60 ms, once every few rounds, delaying every token read meanwhile.
    gc.freeze()
    tasks: list[asyncio.Future[None]] = []

    def spawn(plan: AgentPlan) -> asyncio.Future[None]:
        task = asyncio.ensure_future(_agent(senders[plan.worker], workload, plan, records, start, gate, pacer))
        tasks.append(task)
        return task

    everyone: asyncio.Future[Any]
    if concurrency_of(plans) == 0:
        everyone = asyncio.ensure_future(_arrive(plans, start, spawn))
    else:
        for plan in plans:
            spawn(plan)
        everyone = asyncio.gather(*tasks)
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
        failed = everyone.done() and not everyone.cancelled() and everyone.exception() is not None
        if aborted or failed:  # an agent's exception (a bug) ends the round too: the other agents stop with it
            everyone.cancel()
            for task in tasks:
                task.cancel()
            await asyncio.gather(everyone, *tasks, return_exceptions=True)
        pacer.close()
        gc.unfreeze()
    if failed:
        everyone.result()  # raises it: a bug in an agent is never a quiet short round
    return aborted


async def run_round(
    senders: Sequence[Sender],
    workload: Workload,
    plans: Sequence[AgentPlan],
    boot: int = 0,
    abort: asyncio.Event | None = None,
    sink: list[RoundRecord] | None = None,
    max_in_flight: int | None = None,
    pool: Pool | None = None,
) -> RoundRecord:
    """Every plan's agent at once on this loop. Ended early, in-flight requests are recorded as failures and the
    partial round reaches `sink`."""
    probe = HostLoadProbe()
    monitor = LoopMonitor()
    opened, retries = (pool.opened, pool.retries) if pool is not None else (0, 0)
    records: list[RequestRecord] = []
    start = time.perf_counter()
    aborted = None
    try:
        aborted = await run_agents(senders, workload, plans, records, abort, start, max_in_flight)
    except asyncio.CancelledError:
        aborted = "interrupted"
        raise
    finally:
        client = monitor.stop()
        host = probe.stop()
        round_ = RoundRecord(
            concurrency=concurrency_of(plans),
            wall_s=time.perf_counter() - start,
            requests=records,
            boot=boot,
            conditions=RoundConditions(
                other_cpu_cores=host.other_cores,
                steal_cores=host.steal_cores,
                server_cpu_cores=host.server_cores,
                idle_cores=host.idle_cores,
                yielding_cores=host.yielding_cores,
                client_lag_p99_s=client.lag_p99_s,
                client_cpu_share=client.cpu_share,
                client_bound=client.client_bound,
            ),
            aborted=aborted,
        )
        if pool is not None:
            round_.connections_opened = pool.opened - opened
            round_.connection_retries = pool.retries - retries
        if sink is not None:
            sink.append(round_)
    return round_


class LocalPlayer:
    """Plays rounds on this event loop with one sender per server, all on `pool`'s connections where given."""

    def __init__(
        self,
        senders: Sequence[Sender],
        workload: Workload,
        max_in_flight: int | None = None,
        pool: Pool | None = None,
    ) -> None:
        self._senders = senders
        self._workload = workload
        self._max_in_flight = max_in_flight
        self._pool = pool

    async def play(
        self,
        plans: Sequence[AgentPlan],
        boot: int = 0,
        abort: asyncio.Event | None = None,
        sink: list[RoundRecord] | None = None,
    ) -> RoundRecord:
        return await run_round(self._senders, self._workload, plans, boot, abort, sink, self._max_in_flight, self._pool)


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """`uvloop` where installed: less loop overhead per token read, so the client measures the server rather than
    itself."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
