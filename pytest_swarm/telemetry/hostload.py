"""CPU used by other processes while a round runs: the commonest cause of a false regression.

A CPU hog on the other core cut the embedded engine's throughput by 78% here
(llama.cpp threads wait on each other), so every round records how many cores
processes outside this pytest and its servers kept busy, and a FAIL says so.
"""

from __future__ import annotations

import os
import time

import psutil


def _busy_seconds() -> float:
    times = psutil.cpu_times()
    return float(sum(times) - times.idle - getattr(times, "iowait", 0.0))


def _own_seconds() -> float:
    """CPU seconds of this process and all its descendants (the servers it started)."""
    total = 0.0
    me = psutil.Process(os.getpid())
    for process in [me, *me.children(recursive=True)]:
        try:
            cpu = process.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        total += cpu.user + cpu.system
    return total


class OtherCpuProbe:
    """Start before a round, `stop()` after: the average cores busy outside our process tree."""

    def __init__(self) -> None:
        self._start = time.perf_counter()
        self._busy = _busy_seconds()
        self._own = _own_seconds()

    def stop(self) -> float:
        wall = time.perf_counter() - self._start
        other = (_busy_seconds() - self._busy) - (_own_seconds() - self._own)
        return max(other, 0.0) / wall if wall > 0 else 0.0
