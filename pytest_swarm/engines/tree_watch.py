"""A ready server's process tree, watched: which processes died first (the crash report names it), and the shared
memory left behind."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable

import psutil

from .keeper import shared_memory_files

POLL_S = 0.2
"""How often the watch looks: vLLM took 9 s from a killed rank to its API server's exit here, so deaths a tick apart
are told apart."""


def title(process: psutil.Process) -> str:
    """A process's name as it set it (setproctitle), where /proc's comm cuts it at 15 characters."""
    name = str(process.name())
    with contextlib.suppress(psutil.Error, IndexError):
        first = str(process.cmdline()[0]).split()[0]
        if first.startswith(name):
            return first
    return name


def _alive(pid: int, created: float) -> bool:
    try:
        process = psutil.Process(pid)
        return bool(process.create_time() == created and process.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


class TreeWatch:
    """The processes of a tree as it was when watched, and a thread noting each one's death in order."""

    def __init__(self, processes: Iterable[psutil.Process]) -> None:
        self._members: dict[int, tuple[str, float]] = {}
        for process in processes:
            with contextlib.suppress(psutil.Error):
                self._members[process.pid] = (title(process), process.create_time())
        self.shared = shared_memory_files(self._members)
        self._dead: list[int] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pytest-swarm-tree-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            self._look()

    def _look(self) -> None:
        with self._lock:
            self._dead += [
                pid for pid, (_, created) in self._members.items() if pid not in self._dead and not _alive(pid, created)
            ]

    def lost(self) -> list[str]:
        """The watched processes that died, as "NAME (pid N)", in the order they were seen to (those seen at one look
        in the tree's order, children first)."""
        self._look()
        with self._lock:
            return [f"{self._members[pid][0]} (pid {pid})" for pid in self._dead]

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
