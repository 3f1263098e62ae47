"""A server's keeper: it runs a multi-process engine as its child and takes every process the engine made down with
it.

A child subreaper, so the engine's orphans become its children: its parent-death signal (SIGUSR1) kills them all, a
SIGTERM gives the engine `grace` seconds first, and it exits with the engine's status. It also removes the /dev/shm
files the dead tree mapped. Why: docs/reliability.md. Run as `COMMAND + [GRACE_S, "--", *ARGV]`, standard library
only."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Iterable
from pathlib import Path

PATH = str(Path(__file__).resolve())
COMMAND = (sys.executable, "-P", PATH)
"""This module run as a script; `PATH` in a process's command line says it is a keeper."""
PR_SET_CHILD_SUBREAPER = 36
SHM = Path("/dev/shm")


def _pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def shared_memory_files(pids: Iterable[int]) -> set[Path]:
    """The files in /dev/shm that the processes `pids` map (from /proc/PID/maps)."""
    found: set[Path] = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
                path = line.split(maxsplit=5)[5:]
                if path and path[0].startswith(f"{SHM}/"):
                    found.add(Path(path[0].removesuffix(" (deleted)")))
    return found


def unlink_orphaned(files: set[Path]) -> list[Path]:
    """Remove those of `files` that are still there and that no running process maps: a stopped server's own.
    Returns what was removed."""
    left = {path for path in files if path.exists()}
    if not left:
        return []
    removed = []
    for path in sorted(left - shared_memory_files(_pids())):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append(path)
    return removed


def _descendants() -> list[int]:
    """Every process whose parent chain leads here (orphans included, thanks to the subreaper flag)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()
                parents[int(entry.name)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = [], [os.getpid()]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        found += children
        frontier += children
    return found


def _kill_all(mapped: frozenset[Path] = frozenset()) -> None:
    """Kill every descendant, reap them, then unlink what they (or, `mapped`, those before them) mapped in /dev/shm
    and nothing alive maps any more."""
    pids = _descendants()
    mapped |= shared_memory_files(pids)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:  # reap them, so none lingers as a zombie of ours
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                time.sleep(0.02)
        except ChildProcessError:
            break
    unlink_orphaned(set(mapped))


_ending = False


def _first_ending() -> bool:
    """One ending at a time: a repeated parent-death signal must not re-enter the handler mid-cleanup."""
    global _ending
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGTERM})
    first, _ending = not _ending, True
    return first


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print(f"usage: python -P {PATH} GRACE_S -- ARGV...", file=sys.stderr)
        return 2
    grace_s, command = float(argv[0]), argv[2:]
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    engine = 0  # set once forked: the handlers are in place before, so no signal can come between

    def orphaned(signum: int, frame: object) -> None:
        if not _first_ending():
            return
        _kill_all()
        os._exit(1)

    def stop(signum: int, frame: object) -> None:
        if not _first_ending():
            return
        mapped = frozenset(shared_memory_files(_descendants()))  # before the engine's shutdown unmaps them
        if engine:
            with contextlib.suppress(ProcessLookupError):
                os.kill(engine, signal.SIGTERM)
            for pid in _descendants():  # a stopped engine (a server asleep, sleep.py) hears the SIGTERM once continued
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline and os.waitpid(engine, os.WNOHANG)[0] != engine:
                time.sleep(0.05)
        _kill_all(mapped)
        os._exit(0)

    signal.signal(signal.SIGUSR1, orphaned)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the group; pytest stops the servers itself
    engine = os.fork()
    if engine == 0:
        for restored in (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT):
            signal.signal(restored, signal.SIG_DFL)
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            print(f"keeper: cannot start {command[0]}: {exc}", file=sys.stderr, flush=True)
        os._exit(127)
    _, status = os.waitpid(engine, 0)
    _kill_all()
    if os.WIFSIGNALED(status):  # die of the same signal, so the launcher reads "killed by SIGKILL", not a code
        if os.WTERMSIG(status) not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
