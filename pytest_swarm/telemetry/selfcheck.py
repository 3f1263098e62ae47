"""Is the harness measuring the server or itself? Event-loop lag and client CPU share per round.

A load generator that saturates its own core reports its own limits as the
server's: token timestamps arrive late and TTFT grows with the client's queue, not
the server's. So each round records how late a 20 ms ticker fires on the client's
event loop and what share of a core the client process used, and a round past
either threshold is marked client-bound.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

TICK_S = 0.02
"""Every wake-up of an idle loop costs CPU (about 80 µs of it on these VMs): a 5 ms ticker
cost the client a tenth of its CPU at 64 paced streams, a 20 ms one a fortieth."""
CLIENT_BOUND_CPU_SHARE = 0.8
"""A client using more than this share of one core has no headroom left to timestamp promptly."""
CLIENT_BOUND_LAG_S = 0.02
"""Event-loop lag p99 above this delays timestamps by as much. Lower lags are common where
the server shares the client's cores (CPU inference) and cost TTFT little."""


@dataclass(frozen=True)
class ClientLoad:
    lag_p99_s: float
    lag_max_s: float
    cpu_share: float

    @property
    def client_bound(self) -> bool:
        return self.cpu_share > CLIENT_BOUND_CPU_SHARE or self.lag_p99_s > CLIENT_BOUND_LAG_S


class LoopMonitor:
    """Started on the running loop before a round, stopped after it.

    The ticker is a bare timer callback that re-arms itself, not a task sleeping in
    a loop: a task's wake-up adds a future, its callbacks and a task step to every
    tick, all on the client's CPU.
    """

    def __init__(self) -> None:
        self._lags: list[float] = []
        self._wall = time.perf_counter()
        self._cpu = time.process_time()
        self._loop = asyncio.get_running_loop()
        self._due = self._wall + TICK_S
        self._timer = self._loop.call_later(TICK_S, self._tick)

    def _tick(self) -> None:
        now = time.perf_counter()
        self._lags.append(max(now - self._due, 0.0))
        self._due = now + TICK_S
        self._timer = self._loop.call_later(TICK_S, self._tick)

    def stop(self) -> ClientLoad:
        self._timer.cancel()
        wall = time.perf_counter() - self._wall
        cpu = time.process_time() - self._cpu
        lags = sorted(self._lags) or [0.0]
        p99 = lags[min(len(lags) - 1, int(0.99 * len(lags)))]
        return ClientLoad(p99, lags[-1], cpu / wall if wall > 0 else 0.0)
