"""Sleeping: the idle side of an A/B pair off the hardware while the other is measured, each switch confirmed."""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import httpx
import psutil

from ..client.base import Endpoint
from ..core.errors import SleepError
from ..specs import ServerSpec
from . import keeper
from .process import RunningServer

S = TypeVar("S", bound=ServerSpec)

POLL_S = 0.1
CONNECT_TIMEOUT_S = 10.0
PAUSE_DEADLINE_S = 10.0
"""A signal reaches a process within milliseconds; past this something holds it (an uninterruptible wait on I/O)."""


class Sleeper(Protocol):
    """One running server put to sleep and woken, each call returning once the server has confirmed it."""

    def sleep(self) -> None: ...

    def wake(self) -> None: ...


@dataclass(frozen=True)
class SleepMode(Generic[S]):
    """How an engine's servers sleep: which specs can, the spec as booted to sleep, and the sleeper of a server."""

    applies: Callable[[S], bool]
    """Whether this spec can sleep at all (vLLM: on CUDA only, its sleep mode exists nowhere else)."""
    enable: Callable[[S], S]
    """The spec as it must boot to sleep later (vLLM: `--enable-sleep-mode`); the spec itself where nothing is."""
    sleeper: Callable[[S, RunningServer], Sleeper]
    """The sleeper of one server booted from `enable(spec)`."""


@dataclass(frozen=True)
class Control:
    """Control requests to one server; each failure a SleepError naming the server, the request and the answer."""

    label: str
    endpoint: Endpoint

    def _where(self) -> str:
        return f"{self.label} ({self.endpoint.base_url})"

    def send(
        self, method: str, path: str, body: dict[str, Any] | None = None, timeout_s: float = 60.0, missing: str = ""
    ) -> httpx.Response:
        """One request, waited for up to `timeout_s` (an engine answers once it has slept or woken); `missing` explains
        a 404 (the endpoint is not there)."""
        sent = f"{method} {path}" + (f" {json.dumps(body)}" if body is not None else "")
        try:
            response = httpx.request(
                method,
                self.endpoint.base_url + path,
                json=body,
                headers=dict(self.endpoint.headers),
                timeout=httpx.Timeout(timeout_s, connect=CONNECT_TIMEOUT_S),
            )
        except httpx.HTTPError as exc:
            raise SleepError(f"{self._where()}: {sent} failed: {type(exc).__name__}: {exc}") from None
        if not response.is_success:
            hint = f" ({missing})" if response.status_code == 404 and missing else ""
            raise SleepError(
                f"{self._where()}: {sent} answered HTTP {response.status_code} {response.text[:300]!r}{hint}"
            )
        return response

    def until(self, path: str, reached: Callable[[Any], bool], deadline_s: float, wanted: str) -> None:
        """GET `path` until its JSON satisfies `reached`; SleepError with the last answer past the deadline."""
        deadline = time.monotonic() + deadline_s
        last = "nothing"
        with httpx.Client(headers=dict(self.endpoint.headers), timeout=CONNECT_TIMEOUT_S) as http:
            while True:
                try:
                    response = http.get(self.endpoint.base_url + path)
                    last = f"HTTP {response.status_code} {response.text[:300]!r}"
                    if response.is_success and reached(response.json()):
                        return
                except (httpx.HTTPError, ValueError) as exc:
                    last = f"{type(exc).__name__}: {exc}"
                if time.monotonic() > deadline:
                    raise SleepError(
                        f"{self._where()}: {wanted} not confirmed after {deadline_s:g} s; "
                        f"GET {path} last answered {last}"
                    )
                time.sleep(POLL_S)


class PausedProcess:
    """A server asleep by SIGSTOP of its tree, whatever its engine; SIGCONT wakes it. Its keeper runs on, to catch a
    parent's death."""

    def __init__(self, pid: int, label: str | None = None, deadline_s: float = PAUSE_DEADLINE_S) -> None:
        self.pid = pid
        self.label = label or f"server pid {pid}"
        self.deadline_s = deadline_s
        self._stopped: list[psutil.Process] = []

    def sleep(self) -> None:
        if self._stopped:
            return
        try:
            root = psutil.Process(self.pid)
            level = root.children() if _is_keeper(root) else [root]
        except psutil.Error as exc:
            raise SleepError(f"{self.label}: cannot stop its processes: {type(exc).__name__}: {exc}") from None
        try:
            while level:
                for process in level:
                    with contextlib.suppress(psutil.NoSuchProcess):
                        process.send_signal(signal.SIGSTOP)
                self._stopped += level
                self._await(level, stopped=True)
                level = [child for process in level for child in _children(process)]
        except BaseException:
            self.wake()
            raise

    def wake(self) -> None:
        stopped, self._stopped = self._stopped, []
        for process in reversed(stopped):
            with contextlib.suppress(psutil.NoSuchProcess):
                process.send_signal(signal.SIGCONT)
        self._await(stopped, stopped=False)

    def _await(self, processes: list[psutil.Process], stopped: bool) -> None:
        """Until every process reads as stopped (or runs again); one that has exited counts as either."""
        deadline = time.monotonic() + self.deadline_s
        while True:
            pending = [p for p in processes if _is_stopped(p) != stopped and _alive(p)]
            if not pending:
                return
            if time.monotonic() > deadline:
                raise SleepError(
                    f"{self.label}: pid {', '.join(str(p.pid) for p in pending)} "
                    f"{'not stopped after SIGSTOP' if stopped else 'still stopped after SIGCONT'} "
                    f"within {self.deadline_s:g} s"
                )
            time.sleep(0.005)


def _is_keeper(process: psutil.Process) -> bool:
    return keeper.PATH in list(process.cmdline())[1:3]


def _children(process: psutil.Process) -> list[psutil.Process]:
    try:
        return list(process.children())
    except psutil.NoSuchProcess:
        return []


def _is_stopped(process: psutil.Process) -> bool:
    try:
        return bool(process.status() == psutil.STATUS_STOPPED)
    except psutil.NoSuchProcess:
        return False


def _alive(process: psutil.Process) -> bool:
    try:
        return bool(process.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
