"""The life of one server process: its own group, readiness with a deadline, a stop that is sure. Every engine boots
here."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from .._util.affinity import AFFINITY, pin_processes
from ..client.base import Endpoint
from ..core.errors import BootError, EngineMissing
from ..core.records import ServerInfo
from ..telemetry.counters import ServerProbe
from . import keeper
from .tree_watch import TreeWatch

LOG_TAIL_LINES = 30
_POLL_S = 0.1
_BIND_FAILURE_MARKERS = ("couldn't bind", "address already in use", "bind failed", "failed to bind")


def find_executable(name_or_path: str, hint: str) -> str:
    """The absolute path of an executable named on the PATH or by path, or EngineMissing with `hint`."""
    found = shutil.which(name_or_path)
    if found is None:
        raise EngineMissing(f"{hint} ({name_or_path!r} not found)")
    return found


_BOOTS = itertools.count(1)


def boot_log(log_dir: Path, stem: str) -> Path:
    """A log file no other boot of this run writes (`STEM-N.log`), so an A/B of a server against itself keeps both
    logs."""
    return log_dir / f"{stem}-{next(_BOOTS)}.log"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


_EXCEPTION_LINE = re.compile(
    r"^\s*(?:\(\w+ pid=\d+\) (?:ERROR|CRITICAL) [\d-]+ [\d:]+ \[[^\]]+\] )?"
    r"(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit)(?::|$)"
)
"""An exception's last line, bare or as a vLLM process logs it: a rank that fails says why there, long before the API
server's own "Engine core initialization failed"."""
_ERROR_LINE = re.compile(r"\b(?:ERROR|CRITICAL|FATAL)\b|\berror:")


def first_error(lines: Sequence[str]) -> int | None:
    """The root cause in a server's log: its first exception line, else its first ERROR line; the last lines are often
    the shutdown."""
    for pattern in (_EXCEPTION_LINE, _ERROR_LINE):
        for index, line in enumerate(lines):
            if pattern.search(line):
                return index
    return None


def tail_with_cause(lines: Sequence[str], count: int = LOG_TAIL_LINES) -> str:
    """A log's last `count` lines, after its first error when that lies above them."""
    tail = "\n".join(lines[-count:])
    found = first_error(lines)
    if found is None or found >= len(lines) - count:
        return tail
    return f"first error in the log (line {found + 1}): {lines[found].strip()}\n...\n{tail}"


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


class _Launcher:
    """Starts every server from one long-lived thread under `setpriv --pdeathsig KILL`: the signal follows the starting
    thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._prefix: list[str] | None = None

    def prefix(self, death_signal: str) -> list[str]:
        if self._prefix is None:
            setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
            works = (
                setpriv is not None
                and subprocess.run([setpriv, "--pdeathsig", "KILL", "--", "true"], capture_output=True).returncode == 0
            )
            self._prefix = [str(setpriv), "--pdeathsig"] if works else []
        return [*self._prefix, death_signal, "--"] if self._prefix else []

    def popen(
        self, argv: Sequence[str], death_signal: str = "KILL", cpus: tuple[int, ...] = (), **kwargs: Any
    ) -> subprocess.Popen[bytes]:
        """Start `argv` on the launcher thread; with `cpus`, on those CPUs (the child inherits the thread's mask, see
        _util/affinity.py)."""
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pytest-swarm-launcher")
            executor = self._executor
        command = [*self.prefix(death_signal), *argv]

        def start() -> subprocess.Popen[bytes]:
            with AFFINITY.launching(cpus):
                return subprocess.Popen(command, **kwargs)

        return executor.submit(start).result()


_LAUNCHER = _Launcher()


class ServerProcess:
    """A child in its own process group (so a stop reaches all it started) but our session: a session of its own loses
    CPU to a niced neighbour."""

    managed = True
    """False for a server someone else runs: no process of ours to sample or stop."""

    def __init__(
        self,
        argv: Sequence[str],
        log_path: Path,
        env: dict[str, str] | None = None,
        keeper_grace_s: float | None = None,
        cpus: tuple[int, ...] = (),
        boot_anywhere: bool = False,
        leftovers: Callable[[str], Iterable[Path]] | None = None,
    ) -> None:
        """`keeper_grace_s` runs it under its keeper; `cpus` pins it (after boot with `boot_anywhere`); `leftovers`
        names the files a stop removes."""
        self.argv = list(argv)
        self._leftovers = leftovers
        self.cpus = cpus
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        kept = [*keeper.COMMAND, str(keeper_grace_s), "--"] if keeper_grace_s is not None else []
        with log_path.open("wb") as log:
            self._popen = _LAUNCHER.popen(
                [*kept, *self.argv],
                "KILL" if keeper_grace_s is None else "USR1",  # the keeper's signal for "pytest is gone"
                () if boot_anywhere else cpus,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                process_group=0,
            )
        AFFINITY.hold(cpus)
        self._holds_cpus = True
        self._watch: TreeWatch | None = None

    def watch_tree(self) -> None:
        """Watch every process of the ready tree, so `lost()` names the first that dies and `stop()` removes the
        /dev/shm files it leaves (tree_watch.py)."""
        if self._watch is not None:
            self._watch.close()
        self._watch = TreeWatch(_tree(self.pid))

    def lost(self) -> list[str]:
        """The watched processes that died, in the order they did, as "NAME (pid N)"; empty where none is watched."""
        return [] if self._watch is None else self._watch.lost()

    @property
    def pid(self) -> int:
        return self._popen.pid

    def pin(self) -> None:
        """The whole tree, every thread of it, onto `cpus`, where it booted on every CPU (`boot_anywhere`)."""
        if self.cpus:
            pin_processes(lambda: [p.pid for p in _tree(self.pid)], self.cpus)

    def poll(self) -> int | None:
        return self._popen.poll()

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The log's last lines, after the first error in it where there is one above them (`first_error`)."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return tail_with_cause(text.splitlines(), lines)

    def wait_ready(self, url: str, timeout_s: float) -> None:
        """Poll `url` until it answers 200; fail early when the process dies."""
        deadline = time.monotonic() + timeout_s
        with httpx.Client(timeout=2.0) as http:
            while True:
                code = self.poll()
                if code is not None:
                    raise BootError(
                        f"server died before it was ready ({describe_exit(code)}): {' '.join(self.argv)}\n"
                        f"--- last lines of {self.log_path} ---\n{self.log_tail()}"
                    )
                try:
                    if http.get(url).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    self.stop()
                    raise BootError(
                        f"server not ready after {timeout_s:g} s, the limit of --swarm-boot-timeout (a first boot "
                        f"that fetches its weights may need more) ({url}): {' '.join(self.argv)}\n"
                        f"--- last lines of {self.log_path} ---\n{self.log_tail()}"
                    )
                time.sleep(_POLL_S)

    @contextmanager
    def stopped_on_error(self) -> Iterator[None]:
        """Checks after boot (slots, model, version) run in here: whatever fails, the process never outlives it."""
        try:
            yield
        except BaseException:
            self.stop()
            raise

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM the group, SIGKILL what is left after `grace_s`; a stopped tree is continued after the SIGTERM, so it
        does not run on first."""
        if self._holds_cpus:
            self._holds_cpus = False
            AFFINITY.release(self.cpus)
        if self._popen.returncode is None or _group_alive(self.pid):
            self._terminate(grace_s)
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.close()
            keeper.unlink_orphaned(watch.shared)
        if self._leftovers is not None:
            with contextlib.suppress(OSError):
                for path in self._leftovers(self.log_path.read_text(encoding="utf-8", errors="replace")):
                    path.unlink(missing_ok=True)

    def _terminate(self, grace_s: float) -> None:
        tree = _tree(self.pid)
        _signal_group(self.pid, signal.SIGTERM)
        _signal_group(self.pid, signal.SIGCONT)
        for process in tree:  # those that left the group, too
            with contextlib.suppress(psutil.Error):
                process.send_signal(signal.SIGCONT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._popen.wait(timeout=grace_s)
        _signal_group(self.pid, signal.SIGKILL)
        try:
            self._popen.wait(timeout=grace_s)
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"server pid {self.pid} survived SIGKILL") from exc


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def _tree(pid: int) -> list[psutil.Process]:
    """A process and its descendants, read before they are signalled (a process that exits orphans its children)."""
    try:
        root = psutil.Process(pid)
        return [*root.children(recursive=True), root]
    except psutil.Error:
        return []


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@dataclass
class RunningServer:
    """A ready server: where to reach it, what it really is, and how to stop it."""

    endpoint: Endpoint
    process: ServerProcess
    info: ServerInfo = field(default_factory=lambda: ServerInfo())
    probe: ServerProbe | None = None
    """Where the engine exposes cache counters or a cache reset; None where it has neither."""

    def __post_init__(self) -> None:
        self.info["protocol"] = (
            self.endpoint.protocol
        )  # what the reports read an engine's capabilities from, whoever launched it

    def stop(self) -> None:
        self.process.stop()


def start_on_free_port(
    make_argv: Callable[[int], Sequence[str]],
    log_path: Path,
    health_path: str,
    timeout_s: float,
    env: dict[str, str] | None = None,
    host: str = "127.0.0.1",
    attempts: int = 3,
    make_env: Callable[[int], dict[str, str]] | None = None,
    keeper_grace_s: float | None = None,
    cpus: tuple[int, ...] = (),
    boot_anywhere: bool = False,
    leftovers: Callable[[str], Iterable[Path]] | None = None,
) -> tuple[ServerProcess, int]:
    """Boot on a free port, trying another when the chosen one was taken meanwhile. `make_env` adds the environment
    that depends on the port (Ollama's OLLAMA_HOST)."""
    attempt = 1
    while True:
        port = free_port(host)
        process = ServerProcess(
            make_argv(port),
            log_path,
            {**(env or {}), **(make_env(port) if make_env else {})},
            keeper_grace_s,
            cpus,
            boot_anywhere,
            leftovers,
        )
        try:
            with process.stopped_on_error():
                process.wait_ready(f"http://{host}:{port}{health_path}", timeout_s)
            return process, port
        except BootError:
            bind_failed = any(m in process.log_tail().lower() for m in _BIND_FAILURE_MARKERS)
            if not bind_failed or attempt == attempts:
                raise
            attempt += 1
