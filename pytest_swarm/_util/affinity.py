"""Which CPUs a server and the harness run on, where a server spec names `cpus=`: a server sharing the load
generator's cores starves it (docs/harness.md)."""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path


def supported() -> bool:
    """Whether this platform can pin at all (Linux: sched_setaffinity)."""
    return hasattr(os, "sched_setaffinity")


def cpus_problem(cpus: Iterable[int]) -> str | None:
    """Why this machine cannot pin to `cpus`; None when it can. Only CPUs this process may run on count (a container's
    cpuset)."""
    if not supported():
        return "cpus= needs Linux's sched_setaffinity, which this platform lacks"
    available = AFFINITY.available()
    missing = set(cpus) - available
    if missing:
        return (
            f"cpus={sorted(cpus)} names CPUs this machine does not offer ({cpu_list(missing)}); "
            f"available: {cpu_list(available)}"
        )
    return None


def cpu_list(cpus: Iterable[int]) -> str:
    """CPUs in Linux's cpulist form, "0-3,8": short in a label, and the form taskset and /proc use."""
    ranges: list[list[int]] = []
    for cpu in sorted(set(cpus)):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(f"{low}" if low == high else f"{low}-{high}" for low, high in ranges)


def parse_cpu_list(text: str) -> frozenset[int]:
    """The CPUs a cpulist names ("0-3,8"), `cpu_list`'s inverse; ValueError where `text` is not one."""
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return frozenset(cpus)


def harness_cpus(available: frozenset[int], servers: Iterable[Iterable[int]]) -> frozenset[int]:
    """The CPUs no pinned server holds, or all of them where the servers hold every one: a harness needs a CPU."""
    left = available.difference(*servers)
    return left or available


class _Affinity:
    """The harness's mask, off the running pinned servers' CPUs. One lock, so a launch's mask is not changed before the
    fork."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._original: frozenset[int] | None = None
        """This process's mask before the first pinned server; None while none runs."""
        self._held: Counter[tuple[int, ...]] = Counter()

    def available(self) -> frozenset[int]:
        """The CPUs this process may use, as before any pinning: what a spec's `cpus=` may name."""
        with self._lock:
            return self._original if self._original is not None else frozenset(os.sched_getaffinity(0))

    @contextmanager
    def launching(self, cpus: tuple[int, ...]) -> Iterator[None]:
        """Around a server's start: the child starts on `cpus` or every CPU, never the harness's narrowed mask."""
        with self._lock:
            if not cpus and self._original is None:
                yield
                return
            before = os.sched_getaffinity(0)
            os.sched_setaffinity(0, cpus or self._original or before)
            try:
                yield
            finally:
                os.sched_setaffinity(0, before)

    def hold(self, cpus: tuple[int, ...]) -> None:
        """A server pinned to `cpus` runs: the harness moves off them."""
        if not cpus:
            return
        with self._lock:
            if self._original is None:
                self._original = frozenset(os.sched_getaffinity(0))
            self._held[cpus] += 1
            _pin_threads(harness_cpus(self._original, self._held))

    def release(self, cpus: tuple[int, ...]) -> None:
        """That server stopped: the harness gets its CPUs back (all of its own once no pinned server runs)."""
        if not cpus:
            return
        with self._lock:
            if self._original is None:
                return
            self._held[cpus] -= 1
            if self._held[cpus] <= 0:
                del self._held[cpus]
            _pin_threads(harness_cpus(self._original, self._held))
            if not self._held:
                self._original = None


def _pin_threads(cpus: frozenset[int], process: str = "self") -> int:
    """Every thread of `process` (a pid, or this process) on `cpus`: sched_setaffinity(0) would move the calling
    thread alone. Returns how many were elsewhere before."""
    moved = 0
    try:
        tasks = list(Path(f"/proc/{process}/task").iterdir())
    except FileNotFoundError:
        return 0  # the process ended meanwhile
    for task in tasks:
        try:
            if os.sched_getaffinity(int(task.name)) != cpus:
                os.sched_setaffinity(int(task.name), cpus)
                moved += 1
        except ProcessLookupError:
            continue  # ended meanwhile
    return moved


def pin_processes(pids: Callable[[], Iterable[int]], cpus: Iterable[int]) -> None:
    """Every thread of the processes `pids` onto `cpus`, read again until nothing moves: a new thread inherits the old
    mask."""
    wanted = frozenset(cpus)
    while sum(_pin_threads(wanted, str(pid)) for pid in pids()):
        pass


AFFINITY = _Affinity()
