"""Which servers run: one spec at a time, so no measurement shares the machine with another spec's servers."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Protocol

from ..core.errors import BootError, SleepError
from ..settings import LaunchSettings, LockSettings
from ..specs import ServerSpec
from .gpu_lock import hold_gpus
from .process import RunningServer, describe_exit
from .registry import booted_anywhere, launch, sleep_mode_for
from .sleep import PausedProcess, Sleeper

BOOT_PARALLELISM = 4
"""Servers booted at once: loading N models at the same time would thrash the disk and the CPU."""


class Servers(Protocol):
    """What the run needs of a pool of servers: ServerPool here, a fake of it in the fast tests of run/."""

    def get(
        self, spec: ServerSpec, count: int = 1, fresh: bool = False, resize: bool = False
    ) -> list[RunningServer]: ...

    def crash_report(self) -> str | None: ...

    def pids(self) -> list[int]: ...

    def stop(self) -> None: ...

    def sleeping(self, spec: ServerSpec) -> ServerSpec | None: ...

    def anywhere(self, spec: ServerSpec) -> ServerSpec | None: ...

    def sleep(self, pause: bool = False) -> None: ...

    def wake(self) -> None: ...


class ServerPool:
    """The servers of the spec being measured; booting another spec stops these first."""

    def __init__(self, settings: LaunchSettings, locks: LockSettings) -> None:
        self._settings = settings
        self._locks = locks
        self._spec: ServerSpec | None = None
        self._servers: list[RunningServer] = []
        self._held = ExitStack()
        self._failed: dict[ServerSpec, BootError] = {}
        self._asleep: list[Sleeper] = []

    def get(self, spec: ServerSpec, count: int = 1, fresh: bool = False, resize: bool = False) -> list[RunningServer]:
        """`count` running servers of `spec`; `fresh` forces new boots; `resize` boots or stops only the difference."""
        if spec in self._failed:
            raise self._failed[spec]
        running = self._spec == spec and not fresh and self.crash_report() is None
        if running and len(self._servers) == count:
            return self._servers
        if running and resize:
            kept, dropped = self._servers[:count], self._servers[count:]
            for server in dropped:
                server.stop()
            self._servers = kept  # what a failed boot of the others stops
            self._servers = kept + self._booted(spec, len(kept), count)
            return self._servers
        self.stop()
        self._held.enter_context(hold_gpus(self._locks.lock_dir, spec.gpus, self._locks.timeout_s))
        self._servers = self._booted(spec, 0, count)
        self._spec = spec
        return self._servers

    def _booted(self, spec: ServerSpec, first: int, count: int) -> list[RunningServer]:
        """Servers `first` to `count - 1` booted; a spec that fails is remembered, and every server is stopped."""
        try:
            return self._boot(spec, first, count)
        except BootError as exc:
            self._failed[spec] = exc
            self.stop()
            raise

    def _boot(self, spec: ServerSpec, first: int, count: int) -> list[RunningServer]:
        """Boot servers `first` to `count - 1` with bounded parallelism; one failure stops the others."""
        if first >= count:
            return []
        with ThreadPoolExecutor(max_workers=min(count - first, BOOT_PARALLELISM)) as executor:
            futures = [executor.submit(launch, spec, self._settings, index) for index in range(first, count)]
        booted, errors = [], []
        for future in futures:
            try:
                booted.append(future.result())
            except BootError as exc:
                errors.append(exc)
        if errors:
            for server in booted:
                server.stop()
            detail = (
                f" ({len(errors)} of {count - first} servers failed to boot; the others were stopped)"
                if count - first > 1
                else ""
            )
            raise BootError(f"{errors[0]}{detail}")
        return booted

    def crash_report(self) -> str | None:
        """What died among the running servers: exit status or signal, the processes gone from its tree, and the log
        tail."""
        reports = []
        for index, server in enumerate(self._servers):
            code, lost = server.process.poll(), server.process.lost()
            if code is None and not lost:
                continue
            what = [f"died during the run ({describe_exit(code)})"] if code is not None else []
            if lost:  # a process of its tree (a vLLM rank) died, whether or not the top one followed it yet
                after = f" (then {', '.join(lost[1:])})" if lost[1:] else ""
                what.append(f"the first of its processes to die: {lost[0]}{after}")
            reports.append(
                f"server {index} ({self._spec.label if self._spec else '?'}, pid {server.process.pid}) "
                f"{'; '.join(what)}\n--- last lines of {server.process.log_path} ---\n{server.process.log_tail()}"
            )
        return "\n".join(reports) or None

    def pids(self) -> list[int]:
        return [server.process.pid for server in self._servers if server.process.managed]

    def sleeping(self, spec: ServerSpec) -> ServerSpec | None:
        """The spec as booted to sleep (its engine's sleep mode, engines/sleep.py); None where its engine has none."""
        mode = sleep_mode_for(spec)
        return None if mode is None else mode.enable(spec)

    def anywhere(self, spec: ServerSpec) -> ServerSpec | None:
        """The spec as booted on every CPU and pinned once ready (engine.py); None where its engine boots it pinned."""
        return booted_anywhere(spec)

    def sleep(self, pause: bool = False) -> None:
        """The running servers put to sleep by their engine, or `pause`d (SIGSTOP), so on a CPU they cost the
        measured one nothing."""
        spec = self._spec
        if spec is None or self._asleep:
            return
        mode = None if pause else sleep_mode_for(spec)
        if not pause and mode is None:
            raise SleepError(f"{spec.label}: its engine has no sleep mode for this spec")
        self._asleep = [
            PausedProcess(server.process.pid, spec.label) if mode is None else mode.sleeper(spec, server)
            for server in self._servers
        ]
        for sleeper in self._asleep:
            sleeper.sleep()

    def wake(self) -> None:
        """The servers put to sleep awake again."""
        asleep, self._asleep = self._asleep, []
        for sleeper in asleep:
            sleeper.wake()

    def stop(self) -> None:
        servers, self._servers, self._spec, self._asleep = self._servers, [], None, []
        try:
            for server in servers:
                server.stop()
        finally:
            self._held.close()
            self._held = ExitStack()
