"""An item's rounds on one boot: a warm-up, then the measured rounds, with the server watched meanwhile.

Memory is sampled while the measured rounds run; a guard breach cancels the round
in flight, and what was measured so far is kept, in-flight requests counted as
failures. The server's prefix cache is reset first where it offers that, and its
counters are read around each round. With `Load.generators` > 1 the same rounds
are played by that many load-generator processes instead of this loop
(generators.py); everything else here stays the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol

from ..client import Endpoint, make_client
from ..records import RoundRecord
from ..settings import TelemetrySettings
from ..specs import Load, Workload
from ..telemetry.counters import RoundCounters, ServerProbe
from ..telemetry.memory import MemoryFigures, Sampler
from .agents import LocalPlayer, RoundPlayer, loop_factory
from .generators import Generators
from .planner import Planner

RoundCallback = Callable[[RoundRecord], None]
"""Told of each measured round as it ends (progress lines under -v)."""

PlayerFactory = Callable[[], AbstractAsyncContextManager[RoundPlayer]]
"""Who plays the rounds where the caller decides (the Ray backend's generators on its nodes), started and stopped around them."""


class MemoryWatch(Protocol):
    """What the rounds need of memory telemetry: telemetry.memory.Sampler here, or the Ray backend's samplers on its nodes."""

    on_breach: Callable[[str], None] | None
    breached: str | None

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def figures(self) -> MemoryFigures: ...


@asynccontextmanager
async def _player(endpoints: Sequence[Endpoint], workload: Workload, load: Load) -> AsyncIterator[RoundPlayer]:
    """Who plays the rounds: this event loop, or `load.generators` load-generator processes (started and stopped here)."""
    if load.generators == 1:
        max_in_flight = load.open_loop.max_in_flight if load.open_loop is not None else None
        yield LocalPlayer([make_client(e, workload, load.request_timeout_s) for e in endpoints], workload, max_in_flight)
        return
    async with Generators(endpoints, workload, load) as generators:
        yield generators


async def _run_rounds(
    endpoints: Sequence[Endpoint],
    workload: Workload,
    load: Load,
    planner: Planner,
    boot: int,
    sampler: MemoryWatch | None,
    sink: list[RoundRecord],
    probes: Sequence[ServerProbe | None] = (),
    on_round: RoundCallback | None = None,
    players: PlayerFactory | None = None,
) -> None:
    abort = asyncio.Event()
    chosen = players() if players is not None else _player(endpoints, workload, load)
    async with RoundCounters(probes) as counters, chosen as player:
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
                before = await counters.read()
                round_ = await player.play(planner.round(), boot, abort, sink)
                round_.server_counters = counters.delta(before, await counters.read())
                if round_.aborted == "aborted":  # the guard's abort; a lost load generator gives its own reason
                    round_.aborted = f"round aborted by the guard: {sampler.breached if sampler else 'abort'}"
                if on_round is not None:
                    on_round(round_)
                if round_.aborted:
                    break
        finally:
            if sampler is not None:
                sampler.stop()


def run_load(
    endpoints: Sequence[Endpoint],
    workload: Workload,
    load: Load,
    planner: Planner,
    boot: int = 0,
    telemetry: TelemetrySettings | None = None,
    server_pids: Callable[[], Sequence[int]] = list,
    sink: list[RoundRecord] | None = None,
    probes: Sequence[ServerProbe | None] = (),
    on_round: RoundCallback | None = None,
    players: PlayerFactory | None = None,
    watch: MemoryWatch | None = None,
) -> tuple[list[RoundRecord], MemoryFigures | None]:
    """Warm-up (not returned) and the measured rounds of one item on one boot, on a fresh event loop, as `planner` plans them.

    With `telemetry`, memory of the process trees rooted at `server_pids()` is sampled
    during the measured rounds. Rounds are appended to `sink` as they finish, so a
    caller that is interrupted (Ctrl-C) still holds the rounds measured so far.
    With `probes` (one per server, None where it has none), the server's prefix cache
    is reset first where it offers that, and its counters are read around each round.
    With `load.generators` > 1 the rounds are played by that many child processes
    (generators.py) and merged into the same RoundRecords; prompts, telemetry, the
    guard and the probes stay in this process. `on_round` hears of each measured
    round as it ends. `players` and `watch` replace this machine's generators and memory
    sampler where the caller places them elsewhere (the Ray backend, load/ray/).
    """
    sampler = watch if watch is not None else None if telemetry is None else Sampler(server_pids, telemetry.interval_s, telemetry.guard)
    rounds = sink if sink is not None else []
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        runner.run(_run_rounds(endpoints, workload, load, planner, boot, sampler, rounds, probes, on_round, players))
    return rounds, None if sampler is None else sampler.figures()
