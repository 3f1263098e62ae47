"""A CPU cap on chosen server processes through a cgroup: a regression of a known size, made on purpose.

The benchmark (benchmarks/gating.py) and the gate's e2e test give the candidate's server spec an
environment variable, `SWARM_CPU_CAP=<name>`; while `capped(name, cores)` is open, a
watcher moves every process whose environment carries it into a cgroup of its own
whose CPU quota is `cores`, children included (they inherit the cgroup). cgroup v1's
`cpu.cfs_quota_us` where the cpu controller is mounted on its own, else v2's `cpu.max`.
Root only; a machine without a writable cpu controller raises CapUnavailable, naming it.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CAP_ENV = "SWARM_CPU_CAP"
PERIOD_US = 100_000
V1 = Path("/sys/fs/cgroup/cpu")
V2 = Path("/sys/fs/cgroup")


class CapUnavailable(RuntimeError):
    """No writable cgroup cpu controller here."""


def _group(name: str, cores: float) -> tuple[Path, Path]:
    """Make the cgroup and set its quota: (the group's directory, its procs file)."""
    quota = max(1000, int(cores * PERIOD_US))
    if (V1 / "cpu.cfs_quota_us").exists():
        group = V1 / name
        group.mkdir(exist_ok=True)
        (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (group / "cpu.cfs_quota_us").write_text(str(quota))
        return group, group / "cgroup.procs"
    if (V2 / "cgroup.controllers").exists() and "cpu" in (V2 / "cgroup.controllers").read_text().split():
        group = V2 / name
        group.mkdir(exist_ok=True)
        (group / "cpu.max").write_text(f"{quota} {PERIOD_US}")
        return group, group / "cgroup.procs"
    raise CapUnavailable(f"no writable cgroup cpu controller at {V1} (v1) or {V2} (v2)")


def _tagged(name: str) -> list[int]:
    """PIDs whose environment has SWARM_CPU_CAP=name (processes that end mid-scan are skipped)."""
    wanted = f"{CAP_ENV}={name}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            environ = Path(entry.path, "environ").read_bytes()
        except OSError:
            continue
        if wanted in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


@contextmanager
def capped(name: str, cores: float, poll_s: float = 0.05) -> Iterator[list[int]]:
    """While open, processes tagged `name` run in a cgroup held to `cores` CPUs; yields the PIDs moved so far.

    On exit the watcher stops, whatever is left in the group goes back to the root
    group, and the group is removed.
    """
    try:
        group, procs = _group(name, cores)
    except OSError as exc:
        raise CapUnavailable(f"cannot make a cgroup for the CPU cap: {exc}") from exc
    moved: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            for pid in _tagged(name):
                if pid not in moved:
                    try:
                        procs.write_text(str(pid))
                        moved.append(pid)
                    except OSError:
                        pass  # it ended between the scan and the move
            stop.wait(poll_s)

    watcher = threading.Thread(target=watch, name="cpu-cap", daemon=True)
    watcher.start()
    try:
        yield moved
    finally:
        stop.set()
        watcher.join()
        root = procs.parent.parent / "cgroup.procs"
        for pid in procs.read_text().split():
            with contextlib.suppress(OSError):
                root.write_text(pid)
        with contextlib.suppress(OSError):
            group.rmdir()
