"""Is the harness measuring the server or itself? Event-loop lag and client CPU share per round, and why a client
fell behind."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Literal

TICK_S = 0.02
"""Every wake-up of an idle loop costs the client CPU, so the ticker is no faster than the lag it must see."""
CLIENT_BOUND_CPU_SHARE = 0.8
"""A client using more than this share of one core has no headroom left to timestamp promptly."""
CLIENT_BOUND_LAG_S = 0.02
"""Event-loop lag p99 above this delays timestamps by as much. Lower lags are common where
the server shares the client's cores (CPU inference) and cost TTFT little."""


BUSY_CPU_SHARE = 0.5
"""A client behind its schedule at more than half a core spent most of its own: it, not the machine, set the pace."""
STARVED_IDLE_CORES = 0.5
"""Less than this idle across the machine, while the client used less than BUSY_CPU_SHARE: no core was free for it."""
SERVER_TREE = "the server's process tree"
"""The holder that `cpus=` on the server's spec keeps off the harness's CPUs."""
HOLDER_MIN_CORES = 0.05
"""Who held the cores is named down to this much; less is the noise of any machine."""


@dataclass(frozen=True)
class ClientDiagnosis:
    """Why a client fell behind: `busy`, `starved` or `unclear`; `holders` names who held the cores when starved, in
    cores."""

    kind: Literal["busy", "starved", "unclear"]
    holders: tuple[tuple[str, float], ...] = ()


def diagnose_client(
    cpu_share: float | None,
    idle_cores: float | None,
    server_cores: float | None,
    other_cores: float | None,
    steal_cores: float | None,
) -> ClientDiagnosis:
    """Busy when the client used most of a core; starved when it used little and no core was idle; else unclear."""
    if cpu_share is None:
        return ClientDiagnosis("unclear")
    if cpu_share >= BUSY_CPU_SHARE:
        return ClientDiagnosis("busy")
    if idle_cores is None or idle_cores >= STARVED_IDLE_CORES:
        return ClientDiagnosis("unclear")
    named = (
        (SERVER_TREE, server_cores),
        ("other processes", other_cores),
        ("steal (the hypervisor's other guests)", steal_cores),
    )
    holders = sorted(
        ((who, cores) for who, cores in named if cores is not None and cores >= HOLDER_MIN_CORES), key=lambda h: -h[1]
    )
    return ClientDiagnosis("starved", tuple(holders))


@dataclass(frozen=True)
class ClientLoad:
    """What the client's own event loop went through during a round: its lag and its share of a core."""

    lag_p99_s: float
    lag_max_s: float
    cpu_share: float

    @property
    def client_bound(self) -> bool:
        return self.cpu_share > CLIENT_BOUND_CPU_SHARE or self.lag_p99_s > CLIENT_BOUND_LAG_S


class LoopMonitor:
    """Started on the running loop before a round, stopped after. A self-arming timer callback, cheaper than a task."""

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
