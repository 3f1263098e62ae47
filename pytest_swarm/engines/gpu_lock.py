"""A cross-process FIFO lock per GPU, for shared runners: ticket files in order, a dead owner's removed."""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import orjson
import psutil

from ..core.errors import LockTimeout

log = logging.getLogger(__name__)

_POLL_S = 0.05


@dataclass(frozen=True)
class Owner:
    """Who holds a ticket: a lock is stale when its host is this one and its pid is gone, or its pid now
    belongs to a process started at another time."""

    host: str
    pid: int
    started: float

    @classmethod
    def me(cls) -> Owner:
        return cls(socket.gethostname(), os.getpid(), psutil.Process().create_time())

    def alive(self) -> bool:
        """Alive if on another host (we cannot tell), or the same PID with the same start time."""
        if self.host != socket.gethostname():
            return True
        try:
            return bool(abs(psutil.Process(self.pid).create_time() - self.started) < 0.01)
        except psutil.NoSuchProcess:
            return False


class GpuLock:
    """FIFO lock on one GPU: `with GpuLock(dir, 0).hold(timeout_s=600): ...`."""

    def __init__(self, lock_dir: Path, gpu: int) -> None:
        self.queue = lock_dir / f"gpu{gpu}"
        self.gpu = gpu

    @contextmanager
    def _mutex(self) -> Iterator[None]:
        self.queue.mkdir(parents=True, exist_ok=True)
        with (self.queue / ".mutex").open("w") as mutex:
            fcntl.flock(mutex, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(mutex, fcntl.LOCK_UN)

    def _take_ticket(self, owner: Owner) -> Path:
        with self._mutex():
            ticket = self.queue / f"{time.time_ns():020d}-{owner.pid}.ticket"
            ticket.write_bytes(orjson.dumps({"host": owner.host, "pid": owner.pid, "started": owner.started}))
            return ticket

    def _first_live(self) -> Path | None:
        """The ticket at the head of the queue, after removing those of dead owners."""
        with self._mutex():
            for ticket in sorted(self.queue.glob("*.ticket")):
                try:
                    owner = Owner(**orjson.loads(ticket.read_bytes()))
                except (OSError, orjson.JSONDecodeError, TypeError):
                    continue  # being written or removed this instant
                if owner.alive():
                    return ticket
                ticket.unlink(missing_ok=True)
                log.warning(
                    "GPU %d: removed the stale lock ticket of dead owner pid %d on %s", self.gpu, owner.pid, owner.host
                )
        return None

    def owner(self) -> Owner | None:
        """Who holds the GPU now, if anyone."""
        head = self._first_live()
        return None if head is None else Owner(**orjson.loads(head.read_bytes()))

    @contextmanager
    def hold(self, timeout_s: float) -> Iterator[None]:
        ticket = self._take_ticket(Owner.me())
        try:
            deadline = time.monotonic() + timeout_s
            while self._first_live() != ticket:
                if time.monotonic() > deadline:
                    holder = self.owner()
                    raise LockTimeout(
                        f"GPU {self.gpu} still taken after {timeout_s:g} s"
                        + (f" by pid {holder.pid} on {holder.host}" if holder else "")
                        + f" (lock queue {self.queue})"
                    )
                time.sleep(_POLL_S)
            yield
        finally:
            ticket.unlink(missing_ok=True)


class _Held:
    """The GPUs this process holds, with a holder count: an A/B item's two sides share the turn rather than deadlock."""

    def __init__(self) -> None:
        self.condition = threading.Condition()
        self.tickets: dict[tuple[Path, int], ExitStack] = {}
        self.holders: dict[tuple[Path, int], int] = {}

    @contextmanager
    def hold(self, lock_dir: Path, gpu: int, timeout_s: float) -> Iterator[None]:
        key = (lock_dir.resolve(), gpu)
        with self.condition:
            while key in self.holders and key not in self.tickets:  # another thread of this process is taking it
                self.condition.wait()
            first = key not in self.holders
            self.holders[key] = self.holders.get(key, 0) + 1
        if first:
            ticket = ExitStack()
            try:
                ticket.enter_context(GpuLock(lock_dir, gpu).hold(timeout_s))
            except BaseException:
                with self.condition:
                    del self.holders[key]
                    self.condition.notify_all()
                raise
            with self.condition:
                self.tickets[key] = ticket
                self.condition.notify_all()
        try:
            yield
        finally:
            with self.condition:
                self.holders[key] -= 1
                last = self.tickets.pop(key) if self.holders[key] == 0 else None
                if last is not None:
                    del self.holders[key]
            if last is not None:
                last.close()


_HELD = _Held()


@contextmanager
def hold_gpus(lock_dir: Path, gpus: Sequence[int], timeout_s: float) -> Iterator[None]:
    """All of `gpus`, taken in index order so two jobs wanting overlapping sets cannot deadlock; a GPU this process
    already holds is shared with its holder (_Held)."""
    if not gpus:
        yield
        return
    first, *rest = sorted(set(gpus))
    with _HELD.hold(lock_dir, first, timeout_s), hold_gpus(lock_dir, rest, timeout_s):
        yield
