"""CPU used by other processes while a round runs: the commonest cause of a false regression.

Every round records the cores other processes kept busy, steal time apart, the servers' own CPU and the idle cores,
so a FAIL can say whether a neighbour starved the run (docs/gate.md)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import psutil


def _machine_seconds() -> tuple[float, float, float]:
    """The whole machine's busy, stolen and idle CPU seconds since boot.

    Busy leaves out idle and iowait, and steal: time a virtual CPU wanted to run while
    the hypervisor ran another guest, which no process here used. Guest time is
    already inside user time (/proc/stat counts it in both), so it is left out too.
    Idle counts iowait: a CPU waiting on a disk would have run a ready client.
    """
    times = psutil.cpu_times()
    steal = getattr(times, "steal", 0.0)
    idle = times.idle + getattr(times, "iowait", 0.0)
    outside = idle + sum(getattr(times, name, 0.0) for name in ("steal", "guest", "guest_nice"))
    return float(sum(times) - outside), float(steal), float(idle)


@dataclass(frozen=True)
class HostLoad:
    """Average cores over a round: busy in processes outside our tree, taken by the hypervisor (steal), busy in
    the servers we started, and idle."""

    other_cores: float
    steal_cores: float
    server_cores: float = 0.0
    idle_cores: float = 0.0


def _own_tree() -> list[psutil.Process]:
    """Our own process and all its descendants (the servers and load generators it started)."""
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
            threads = list(Path(f"/proc/{parent}/task").iterdir())
        except OSError:
            continue  # ended meanwhile
        for thread in threads:
            try:
                children = [int(child) for child in (thread / "children").read_bytes().split()]
            except FileNotFoundError:
                if parent == pid and not found:
                    return None
                continue
            except OSError:
                continue
            found += children
            parents += children
    return found


def _servers(tree: list[psutil.Process]) -> set[int]:
    """The pids of our tree in a process group other than ours: the servers (process.py starts each in a group of its
    own) and all they started; the load generators stay in ours."""
    ours = os.getpgid(0)
    found = set()
    for process in tree:
        try:
            if os.getpgid(process.pid) != ours:
                found.add(process.pid)
        except ProcessLookupError:
            continue
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


class HostLoadProbe:
    """Start before a round, `stop()` after: the average cores busy outside our process tree, and stolen.

    The tree is found once, at the start; a process started during the round counts as another's."""

    def __init__(self) -> None:
        self._start = time.perf_counter()
        self._busy, self._steal, self._idle = _machine_seconds()
        self._tree = _own_tree()
        self._servers = _servers(self._tree)
        self._own = _cpu_seconds(self._tree)

    def stop(self) -> HostLoad:
        wall = time.perf_counter() - self._start
        used = {pid: seconds - self._own[pid] for pid, seconds in _cpu_seconds(self._tree).items() if pid in self._own}
        busy, steal, idle = _machine_seconds()
        if wall <= 0:
            return HostLoad(0.0, 0.0)
        return HostLoad(
            other_cores=max(busy - self._busy - sum(used.values()), 0.0) / wall,
            steal_cores=max(steal - self._steal, 0.0) / wall,
            server_cores=sum(seconds for pid, seconds in used.items() if pid in self._servers) / wall,
            idle_cores=max(idle - self._idle, 0.0) / wall,
        )
