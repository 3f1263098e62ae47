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


def _own_tree() -> list[psutil.Process]:
    """This process and all its descendants (the servers and load generators it started)."""
    me = psutil.Process(os.getpid())
    pids = _descendants(me.pid)
    if pids is None:
        return [me, *me.children(recursive=True)]
    tree = [me]
    for pid in pids:
        try:
            tree.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            continue
    return tree


def _descendants(pid: int) -> list[int] | None:
    """Descendant pids from the kernel's per-thread children lists; None where Linux keeps none (CONFIG_PROC_CHILDREN).

    psutil finds children by reading every process on the machine (1.3 ms with 67
    processes here, far more on a busy runner); the kernel's lists cost a read per
    thread of our own tree.
    """
    found: list[int] = []
    parents = [pid]
    while parents:
        parent = parents.pop()
        try:
            threads = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue  # ended meanwhile
        for thread in threads:
            try:
                with open(f"/proc/{parent}/task/{thread}/children", "rb") as file:
                    children = [int(child) for child in file.read().split()]
            except FileNotFoundError:
                if parent == pid and not found:
                    return None
                continue
            except OSError:
                continue
            found += children
            parents += children
    return found


def _cpu_seconds(processes: list[psutil.Process]) -> dict[int, float]:
    """CPU seconds of each process still running, by pid."""
    seconds = {}
    for process in processes:
        try:
            cpu = process.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        seconds[process.pid] = cpu.user + cpu.system
    return seconds


class OtherCpuProbe:
    """Start before a round, `stop()` after: the average cores busy outside our process tree.

    The tree is found once, at the start: finding it reads every process on the
    machine (psutil's parent map), 1.3 ms on a quiet 2-core VM and more on a busy
    runner, so it is not repeated at the stop. Our CPU is the sum over processes
    seen at both ends; one that ended meanwhile took its last CPU with it, and one
    started during the round counts as another's (servers and load generators start
    before the rounds).
    """

    def __init__(self) -> None:
        self._start = time.perf_counter()
        self._busy = _busy_seconds()
        self._tree = _own_tree()
        self._own = _cpu_seconds(self._tree)

    def stop(self) -> float:
        wall = time.perf_counter() - self._start
        own = sum(seconds - self._own[pid] for pid, seconds in _cpu_seconds(self._tree).items() if pid in self._own)
        other = (_busy_seconds() - self._busy) - own
        return max(other, 0.0) / wall if wall > 0 else 0.0
