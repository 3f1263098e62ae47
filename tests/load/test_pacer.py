"""The open-loop pacer: arrivals wake at their instants, never before, in order, on a timerfd where Linux has one."""

import asyncio
import random
import sys
import time
from pathlib import Path

import pytest
import uvloop

from pytest_swarm.load import pacer as pacer_module
from pytest_swarm.load.pacer import Pacer, sleep_until


def test_sleep_until_never_wakes_before_the_instant_on_uvloop() -> None:
    """Under uvloop, timers round to the millisecond and wake early (a third of plain sleeps did here); an arrival or a
    generator's common start that fired early would begin a request before its round did."""

    async def lateness() -> list[float]:
        seen = []
        for i in range(100):
            due = time.perf_counter() + 0.0013 + i * 1e-5
            await sleep_until(due)
            seen.append(time.perf_counter() - due)
        return seen

    assert min(uvloop.run(lateness())) >= 0.0


async def _wake_all(pacer: Pacer, dues: list[float], woke: list[tuple[float, float]]) -> None:
    async def one(due: float) -> None:
        await pacer.until(due)
        woke.append((due, time.perf_counter()))

    await asyncio.gather(*(one(d) for d in dues))


@pytest.mark.quiet  # the order holds for instants still ahead when registered: a loop held up 5 ms by a busy host
# finds several already past, and wakes those at once in the order they came (a fresh-clone CI run here, beside the
# vLLM install)
@pytest.mark.parametrize("timerfd", [True, False], ids=["timerfd", "loop-timers"])
def test_waiters_wake_at_or_after_their_instants_in_order(monkeypatch: pytest.MonkeyPatch, timerfd: bool) -> None:
    """Waiters registered out of order (a later one first, the timer re-armed for an earlier one) all wake, none
    early, in the order of their instants; without a timerfd the loop's timers wake them too, none early (those due
    within one of its milliseconds in any order)."""
    if not timerfd:
        monkeypatch.setattr(pacer_module, "_CALLS", None)
    woke: list[tuple[float, float]] = []

    async def main() -> bool:
        base = time.perf_counter() + 0.005
        dues = [base + 0.0003 * i for i in range(60)]
        random.Random(7).shuffle(dues)
        with Pacer() as pacer:
            await _wake_all(pacer, [*dues, base - 1.0], woke)  # one already past: returns at once
            return pacer.timerfd

    used = uvloop.run(main())
    assert used is timerfd
    assert len(woke) == 61
    assert all(at >= due for due, at in woke)
    if timerfd:
        assert [due for due, _ in woke] == sorted(due for due, _ in woke)


@pytest.mark.skipif(sys.platform != "linux", reason="timerfd is Linux's")
def test_linux_gets_a_timerfd_and_closing_lets_it_go() -> None:
    def timerfds() -> int:
        return sum(1 for fd in Path("/proc/self/fd").iterdir() if "timerfd" in _link(fd))

    async def main() -> tuple[bool, int, bool]:
        with Pacer() as pacer:
            held, inside = pacer.timerfd, timerfds()
        return held, inside, pacer.timerfd

    before = timerfds()
    held, inside, after = uvloop.run(main())
    assert held and inside == before + 1
    assert not after and timerfds() == before


def _link(path: Path) -> str:
    try:
        return str(path.readlink())
    except OSError:  # the listing's own descriptor, closed by now
        return ""


def test_a_cancelled_waiter_leaves_the_others_waking() -> None:
    """A round cancelled mid-wait (Ctrl-C, an abort) cancels its agents' waits; those of other agents still wake."""
    woke: list[tuple[float, float]] = []

    async def main() -> None:
        with Pacer() as pacer:
            start = time.perf_counter()
            early = asyncio.ensure_future(pacer.until(start + 0.002))
            await asyncio.sleep(0)
            early.cancel()
            await _wake_all(pacer, [start + 0.004, start + 0.006], woke)
            assert early.cancelled()

    uvloop.run(main())
    assert len(woke) == 2 and all(at >= due for due, at in woke)


def test_close_cancels_waiters_still_pending() -> None:
    async def main() -> bool:
        pacer = Pacer()
        waiting = asyncio.ensure_future(pacer.until(time.perf_counter() + 60))
        await asyncio.sleep(0.001)
        pacer.close()
        await asyncio.wait([waiting])
        return waiting.cancelled()

    assert uvloop.run(main())


@pytest.mark.quiet  # counts the timer's arms: a process held back past a few instants arms it fewer times (CI, -n 2)
def test_a_failing_timerfd_hands_its_waiters_to_the_loops_timers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Should timerfd_settime fail mid-round, the arrivals waiting on it still wake, none early, and later ones sleep on
    the loop's timers: a round is never stalled by its pacer."""
    assert pacer_module._CALLS is not None
    create, settime = pacer_module._CALLS
    calls = {"n": 0}

    def failing_after_two(*args: object) -> int:
        calls["n"] += 1
        return -1 if calls["n"] > 2 else settime(*args)

    monkeypatch.setattr(pacer_module, "_CALLS", (create, failing_after_two))
    woke: list[tuple[float, float]] = []

    async def main() -> bool:
        base = time.perf_counter() + 0.02
        with Pacer() as pacer:
            await _wake_all(pacer, [base + 0.005 * i for i in range(8)], woke)
            return pacer.timerfd

    assert not uvloop.run(main())  # it let the timerfd go
    assert calls["n"] == 3
    assert len(woke) == 8 and all(at >= due for due, at in woke)
