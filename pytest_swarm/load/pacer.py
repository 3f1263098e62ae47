"""Waking at an open-loop arrival's instant through a Linux timerfd, where the loop's own timers are late
(docs/harness.md)."""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import heapq
import os
import time
from collections.abc import Callable
from types import TracebackType

_CLOCK_MONOTONIC = 1
_TFD_NONBLOCK = os.O_NONBLOCK
_TFD_CLOEXEC = 0o2000000
_TFD_TIMER_ABSTIME = 1


async def sleep_until(due: float) -> None:
    """Sleep until perf_counter() reaches `due` on the loop's timers: they round to the millisecond, so check and sleep
    again."""
    while (left := due - time.perf_counter()) > 0:
        await asyncio.sleep(left)


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _timerfd_calls() -> tuple[Callable[..., int], Callable[..., int]] | None:
    """The C library's timerfd_create and timerfd_settime where it has them and perf_counter reads CLOCK_MONOTONIC (the
    clock the timer is armed on); else None."""
    if "CLOCK_MONOTONIC" not in time.get_clock_info("perf_counter").implementation:
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        create, settime = libc.timerfd_create, libc.timerfd_settime
    except (OSError, AttributeError):
        return None
    create.argtypes = [ctypes.c_int, ctypes.c_int]
    create.restype = ctypes.c_int
    settime.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Itimerspec), ctypes.c_void_p]
    settime.restype = ctypes.c_int
    return create, settime


_CALLS = _timerfd_calls()


class Pacer:
    """Wakes a loop's waiters at their perf_counter instants; `timerfd` says whether it got one or uses the loop's
    timers."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._waiting: list[tuple[float, int, asyncio.Future[None]]] = []
        self._count = 0
        self._fd = -1
        if _CALLS is not None:
            fd = _CALLS[0](_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
            if fd >= 0:
                self._fd = fd
                self._loop.add_reader(fd, self._fire)

    @property
    def timerfd(self) -> bool:
        return self._fd >= 0

    def __enter__(self) -> Pacer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Let go of the timerfd; waiters still pending are cancelled (their rounds are ending)."""
        self._let_go()
        for _, _, waiter in self._waiting:
            waiter.cancel()
        self._waiting.clear()

    async def until(self, due: float) -> None:
        """Return at perf_counter() `due` (at once if it has passed)."""
        if self._fd < 0:
            await sleep_until(due)
            return
        if due <= time.perf_counter():
            return
        waiter = self._loop.create_future()
        self._count += 1
        earliest = not self._waiting or due < self._waiting[0][0]  # the timer is always armed for the heap's first
        heapq.heappush(self._waiting, (due, self._count, waiter))
        if earliest:
            self._arm(due)
        await waiter
        if self._fd < 0:  # the timerfd failed meanwhile, and the loop's timers may have woken this one early
            await sleep_until(due)

    def _arm(self, due: float | None) -> None:
        """Set the timer to fire at `due`, or disarm it (None). If the call fails the waiters fall back to the loop's
        timers: late, never lost."""
        assert _CALLS is not None
        spec = _Itimerspec()
        if due is not None:
            seconds = int(due)
            spec.it_value.tv_sec = seconds
            spec.it_value.tv_nsec = max(int((due - seconds) * 1e9), 1 if seconds == 0 else 0)  # all zero disarms
        if _CALLS[1](self._fd, _TFD_TIMER_ABSTIME, ctypes.byref(spec), None) != 0:
            self._to_loop_timers()

    def _let_go(self) -> None:
        if self._fd >= 0:
            self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1

    def _to_loop_timers(self) -> None:
        self._let_go()
        now = time.perf_counter()
        for due, _, waiter in self._waiting:
            self._loop.call_later(max(due - now, 0.0), _wake, waiter)
        self._waiting.clear()

    def _fire(self) -> None:
        now = time.perf_counter()
        while self._waiting and self._waiting[0][0] <= now:
            _wake(heapq.heappop(self._waiting)[2])
        self._arm(self._waiting[0][0] if self._waiting else None)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():  # a cancelled waiter's round is ending: nothing to wake
        waiter.set_result(None)
