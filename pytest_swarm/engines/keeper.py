"""A server's keeper: it runs a multi-process engine as its child and takes every process the engine made down with it.

pytest killed by SIGKILL runs no cleanup. The kernel's parent-death signal
(`setpriv --pdeathsig`) reaches the one process pytest started, and an engine that
starts processes of its own (vLLM's EngineCore and workers) leaves them running
when only that one dies: they were seen alive a minute after a killed pytest. So
the launcher starts this keeper in the engine's place. The keeper is a child
subreaper (Linux's PR_SET_CHILD_SUBREAPER): whatever the engine's processes leave
orphaned becomes its child, not init's. SIGUSR1, its parent-death signal (pytest is
gone, nobody waits for a graceful end), kills every descendant at once. SIGTERM (a
stop) is passed to the engine, which gets `grace` seconds to shut down its own
processes before every descendant left is killed; what was stopped (SIGSTOP, a server
asleep) is continued then, or the SIGTERM would wait for it. When the engine exits by
itself what is left is killed too. The keeper exits with the engine's own status, so a
crash still reads as the engine's exit code or signal.

Run as `COMMAND + [GRACE_S, "--", *ARGV]`: the file by its path, standard library only (as
xllamacpp_server.py's COMMAND, and for the same reason: no import of the package at every boot).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from pathlib import Path

PATH = str(Path(__file__).resolve())
COMMAND = (sys.executable, "-P", PATH)
"""This module run as a script; `PATH` in a process's command line says it is a keeper."""
PR_SET_CHILD_SUBREAPER = 36


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


def _kill_all() -> None:
    for pid in _descendants():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:  # reap them, so none lingers as a zombie of ours
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                time.sleep(0.02)
        except ChildProcessError:
            return


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print(f"usage: python -P {PATH} GRACE_S -- ARGV...", file=sys.stderr)
        return 2
    grace_s, command = float(argv[0]), argv[2:]
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    engine = 0  # set once forked: the handlers are in place before, so no signal can come between

    def orphaned(signum: int, frame: object) -> None:
        _kill_all()
        os._exit(1)

    def stop(signum: int, frame: object) -> None:
        if engine:
            with contextlib.suppress(ProcessLookupError):
                os.kill(engine, signal.SIGTERM)
            for pid in _descendants():  # a stopped engine (a server asleep, sleep.py) hears the SIGTERM once continued
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline and os.waitpid(engine, os.WNOHANG)[0] != engine:
                time.sleep(0.05)
        _kill_all()
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
