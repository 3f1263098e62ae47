"""An item's rounds on one boot: a warm-up, then the measured rounds, with the server watched meanwhile.

A memory guard breach cancels the round, keeping what was measured."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._util.open_files import room_for
from ..client import Endpoint, Pool
from ..core.errors import DescriptorLimit
from ..core.records import RoundRecord
from ..settings import TelemetrySettings
from ..specs import Load, OpenLoop, Workload
from ..telemetry.counters import RoundCounters, ServerProbe, Watched
from ..telemetry.memory import MemoryFigures, Sampler
from .agents import LocalPlayer, RoundPlayer, loop_factory
from .bodies import senders_for
from .generator_pool import Generators
from .planner import Planner

RoundCallback = Callable[[RoundRecord], None]
"""Told of each measured round as it ends (progress lines under -v)."""

PlayerFactory = Callable[[], AbstractAsyncContextManager[RoundPlayer]]
"""Who plays the rounds where the caller decides (the Ray backend's generators on its nodes), started and stopped around
them."""


class MemoryWatch(Protocol):
    """What the rounds need of memory telemetry: telemetry.memory.Sampler here, or the Ray backend's samplers on its
    nodes."""

    on_breach: Callable[[str], None] | None
    breached: str | None

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def figures(self) -> MemoryFigures: ...


def streams_per_process(load: Load) -> int | None:
    """The most streams one process of the round holds at once; None where nothing bounds them."""
    match load.open_loop, load.generators:
        case None, generators:
            return -(-load.agents // generators)
        case OpenLoop(max_in_flight=int(held)), 1:
            return held
    return None


def refuse_beyond_descriptors(load: Load) -> None:
    """Before the rounds: DescriptorLimit where a process would need more open files than its limits allow, once
    raised."""
    streams = streams_per_process(load)
    if streams is None:
        return
    where = "this round's event loop" if load.generators == 1 else f"each of the round's {load.generators} generators"
    problem = room_for(streams, where)
    if problem is not None:
        raise DescriptorLimit(problem)


@asynccontextmanager
async def _player(endpoints: Sequence[Endpoint], workload: Workload, load: Load) -> AsyncIterator[RoundPlayer]:
    """Who plays the rounds: this event loop, or `load.generators` load-generator processes started and stopped here."""
    refuse_beyond_descriptors(load)
    if load.generators == 1:
        max_in_flight = load.max_in_flight
        pool = Pool()
        senders = senders_for(endpoints, workload, load.request_timeout_s, pool)
        try:
            yield LocalPlayer(senders, workload, max_in_flight, pool)
        finally:
            pool.close()
        return
    async with Generators(endpoints, workload, load) as generators:
        yield generators


@dataclass(frozen=True)
class Rounds:
    """One boot's warm-up and measured rounds, one typed request the real and fake players share. Rounds go to `sink`
    as they finish, so an interrupted caller keeps them."""

    endpoints: Sequence[Endpoint]
    workload: Workload
    load: Load
    planner: Planner
    boot: int = 0
    telemetry: TelemetrySettings | None = None
    server_pids: Callable[[], Sequence[int]] = list
    sink: list[RoundRecord] = field(default_factory=list)
    probes: Sequence[ServerProbe | None] = ()
    on_round: RoundCallback | None = None
    players: PlayerFactory | None = None
    watch: MemoryWatch | None = None


def _watched(round_: RoundRecord, watched: Watched) -> None:
    """What the servers said of the round, on it."""
    for name, value in vars(watched).items():
        setattr(round_, name, value)


async def _run_rounds(asked: Rounds, sampler: MemoryWatch | None) -> None:
    load, planner, boot, sink, on_round = asked.load, asked.planner, asked.boot, asked.sink, asked.on_round
    abort = asyncio.Event()
    chosen = asked.players() if asked.players is not None else _player(asked.endpoints, asked.workload, load)
    async with RoundCounters(asked.probes) as counters, chosen as player:
        await counters.reset()  # each level starts from an empty prefix cache, where the server offers a reset
        if load.warmup:
            await player.play(planner.warmup())
        if sampler is not None:
            loop = asyncio.get_running_loop()

            def on_breach(reason: str) -> None:
                loop.call_soon_threadsafe(abort.set)

            sampler.on_breach = on_breach
            sampler.start()
        try:
            for _ in range(load.rounds):
                await counters.begin()
                round_ = await player.play(planner.round(), boot, abort, sink)
                _watched(round_, await counters.end())
                if round_.aborted == "aborted":  # the guard's abort; a lost load generator gives its own reason
                    round_.aborted = f"round aborted by the guard: {sampler.breached if sampler else 'abort'}"
                if on_round is not None:
                    on_round(round_)
                if round_.aborted:
                    break
        finally:
            if sampler is not None:
                sampler.stop()


def play_rounds(asked: Rounds) -> tuple[list[RoundRecord], MemoryFigures | None]:
    """Warm-up and measured rounds of one item on one boot, on a fresh event loop; the rounds and the servers'
    memory."""
    sampler = (
        asked.watch
        if asked.watch is not None
        else None
        if asked.telemetry is None
        else Sampler(asked.server_pids, asked.telemetry.interval_s, asked.telemetry.guard)
    )
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        runner.run(_run_rounds(asked, sampler))
    return asked.sink, None if sampler is None else sampler.figures()


def run_load(
    endpoints: Sequence[Endpoint], workload: Workload, load: Load, planner: Planner, **options: Any
) -> tuple[list[RoundRecord], MemoryFigures | None]:
    """`play_rounds` with the request spelt as arguments (`options`: Rounds' other fields): for scripts and
    benchmarks that drive the load stage directly."""
    return play_rounds(Rounds(endpoints, workload, load, planner, **options))


@dataclass
class PairSide:
    """One side of an A/B item paired in time: its running servers, its plans, where its rounds go."""

    endpoints: Sequence[Endpoint]
    workload: Workload
    load: Load
    planner: Planner
    sink: list[RoundRecord]
    probes: Sequence[ServerProbe | None] = ()
    sampler: MemoryWatch | None = None
    on_round: RoundCallback | None = None
    turn: Callable[[], None] | None = None
    """Made before each of this side's rounds where the sides take turns; blocking, and outside the round's time."""


@dataclass(frozen=True)
class PairBlock:
    """The pairs of one boot of both sides: numbering, how many must count and may be played, each pair's order, and
    which do not count."""

    boot: int
    first_pair: int
    wanted: int
    limit: int
    reference_first: Callable[[], bool]
    spoiled: Callable[[RoundRecord, RoundRecord], bool]


async def _run_pairs(sides: Sequence[PairSide], block: PairBlock) -> int:
    abort = asyncio.Event()
    loop = asyncio.get_running_loop()
    played = kept = 0
    async with AsyncExitStack() as stack:
        counters = [await stack.enter_async_context(RoundCounters(side.probes)) for side in sides]
        players = [await stack.enter_async_context(_player(side.endpoints, side.workload, side.load)) for side in sides]
        for side, side_counters, player in zip(sides, counters, players, strict=True):
            if side.turn is not None:
                await asyncio.to_thread(side.turn)
            await side_counters.reset()
            if (
                side.load.warmup
            ):  # one side at a time: two llama.cpp servers decoding at once on 2 cores took 17-28 s, not 4
                await player.play(side.planner.warmup())
        samplers = [side.sampler for side in sides if side.sampler is not None]

        def on_breach(reason: str) -> None:
            loop.call_soon_threadsafe(abort.set)

        for sampler in samplers:
            sampler.on_breach = on_breach
            sampler.start()
        try:
            while kept < block.wanted and played < block.limit:
                halves: list[RoundRecord] = [None, None]  # type: ignore[list-item]  # both set below, or the function returns
                for index in (1, 0) if block.reference_first() else (0, 1):
                    side = sides[index]
                    if side.turn is not None:
                        await asyncio.to_thread(side.turn)
                    await counters[index].begin()
                    round_ = await players[index].play(side.planner.round(), block.boot, abort, side.sink)
                    round_.pair = block.first_pair + played
                    _watched(round_, await counters[index].end())
                    if round_.aborted == "aborted":
                        breached = next((s.breached for s in samplers if s.breached), "abort")
                        round_.aborted = f"round aborted by the guard: {breached}"
                    if side.on_round is not None:
                        side.on_round(round_)
                    if round_.aborted:
                        return played
                    halves[index] = round_
                played += 1
                kept += 0 if block.spoiled(halves[0], halves[1]) else 1
        finally:
            for sampler in samplers:
                sampler.stop()
    return played


def run_pairs(sides: Sequence[PairSide], block: PairBlock) -> int:
    """One boot of both sides, both up: a warm-up each, then pairs in a drawn order, so drift favours neither, until
    `block.wanted` count. Returns the pairs played."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(_run_pairs(sides, block))
