"""CPU used by other processes while a round runs, the commonest cause of a false regression, so a FAIL can say
whether a neighbour starved the run."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import psutil


def _machine_seconds() -> tuple[float, float, float]:
    """The whole machine's busy, stolen and idle CPU seconds since boot; idle counts iowait, busy leaves out guest
    time."""
    times = psutil.cpu_times()
    steal = getattr(times, "steal", 0.0)
    idle = times.idle + getattr(times, "iowait", 0.0)
    outside = idle + sum(getattr(times, name, 0.0) for name in ("steal", "guest", "guest_nice"))
    return float(sum(times) - outside), float(steal), float(idle)


@dataclass(frozen=True)
class HostLoad:
    """Average cores over a round: busy in processes outside our tree, taken by the hypervisor (steal), busy in
    the servers we started, idle, and busy in processes outside our tree that yield to ours (`yielding`): those not
    in `other_cores`."""

    other_cores: float
    steal_cores: float
    server_cores: float = 0.0
    idle_cores: float = 0.0
    yielding_cores: float = 0.0


_MEASURED_NOT_STARTED: set[int] = set()
"""Servers on this machine that the run measures but did not start, by pid (engines/external.py registers them)."""


def measure_as_server(pid: int) -> None:
    """A server someone else started on this machine (a `Server.endpoint` on loopback) and its children: their CPU is
    the server's in every round's host load, not a neighbour's that would spoil the pairs."""
    _MEASURED_NOT_STARTED.add(pid)


def _measured_not_started() -> list[psutil.Process]:
    found = []
    for pid in list(_MEASURED_NOT_STARTED):
        for each in (pid, *(_descendants(pid) or ())):
            try:
                found.append(psutil.Process(each))
            except psutil.NoSuchProcess:
                continue
    return found


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
    """Descendant pids from the kernel's children lists, cheaper than psutil's scan; None without
    CONFIG_PROC_CHILDREN."""
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


_AUTOGROUPS = Path("/proc/sys/kernel/sched_autogroup_enabled")


def _autogroups_on() -> bool:
    try:
        return _AUTOGROUPS.read_text().strip() == "1"
    except OSError:
        return False


def _scheduling_group(pid: int, autogroups: bool) -> tuple[str, str] | None:
    """Where the kernel weighs a process against others: its cpu cgroup and, in the root one with autogroups on, its
    autogroup (one per session). None when it has ended."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        fields = [line.split(":", 2) for line in lines if line.count(":") >= 2]
        cpu = next((path for _, names, path in fields if "cpu" in names.split(",")), None)
        cgroup = cpu if cpu is not None else next((path for n, _, path in fields if n == "0"), "/")
        autogroup = Path(f"/proc/{pid}/autogroup").read_text().split(" ", 1)[0] if autogroups and cgroup == "/" else ""
    except OSError:
        return None
    return cgroup, autogroup


def _yielding(tree: list[psutil.Process]) -> list[psutil.Process]:
    """Processes outside our tree that the kernel makes yield to every one of ours: a positive nice, weighed in the one
    scheduling group all of ours share. A nice process weighed elsewhere (another session where autogroups weigh
    sessions, another cgroup, or against a server held in a cgroup of its own) takes its group's share like any
    neighbour (docs/gate.md)."""
    autogroups = _autogroups_on()
    groups = {_scheduling_group(process.pid, autogroups) for process in tree} - {None}
    if len(groups) != 1:
        return []
    (ours,) = groups
    mine = {process.pid for process in tree}
    found = []
    for process in psutil.process_iter(["nice"]):
        nice = process.info["nice"]
        if process.pid in mine or nice is None or nice <= 0:
            continue
        if _scheduling_group(process.pid, autogroups) == ours:
            found.append(process)
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
    """Start before a round, `stop()` after: average cores busy outside our tree, and stolen. The tree is found at
    the start."""

    def __init__(self) -> None:
        self._tree = _own_tree() + _measured_not_started()
        self._yielding = _yielding(self._tree)
        self._servers = _servers(self._tree)
        self._start = time.perf_counter()
        self._busy, self._steal, self._idle = _machine_seconds()
        self._own = _cpu_seconds(self._tree)
        self._others = _cpu_seconds(self._yielding)

    def stop(self) -> HostLoad:
        wall = time.perf_counter() - self._start
        used = {pid: seconds - self._own[pid] for pid, seconds in _cpu_seconds(self._tree).items() if pid in self._own}
        yielded = sum(
            seconds - self._others[pid] for pid, seconds in _cpu_seconds(self._yielding).items() if pid in self._others
        )
        busy, steal, idle = _machine_seconds()
        if wall <= 0:
            return HostLoad(0.0, 0.0)
        return HostLoad(
            other_cores=max(busy - self._busy - sum(used.values()) - yielded, 0.0) / wall,
            steal_cores=max(steal - self._steal, 0.0) / wall,
            server_cores=sum(seconds for pid, seconds in used.items() if pid in self._servers) / wall,
            idle_cores=max(idle - self._idle, 0.0) / wall,
            yielding_cores=max(yielded, 0.0) / wall,
        )
