"""SIGTERM (a cancelled CI job) takes pytest's Ctrl-C path, so servers stop and reports get written. Under uvloop it
is raised from a scheduled callback."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType


def stop_on_sigterm(add_cleanup: Callable[[Callable[[], None]], None]) -> None:
    """Install the handler until `add_cleanup`'s owner ends; only in the main thread, and only where nobody
    installed a handler of their own."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        return
    signal.signal(signal.SIGTERM, interrupt)
    add_cleanup(_restore)


def _restore() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def interrupt(signum: int, frame: FrameType | None) -> None:
    """Raise KeyboardInterrupt here, or from the running event loop's next callback."""
    error = KeyboardInterrupt(f"pytest-swarm: received {signal.Signals(signum).name}")
    if "asyncio" not in sys.modules:  # never imported: no loop can be running, and none is imported for nothing
        raise error
    import asyncio

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise error from None
    loop.call_soon_threadsafe(_raise, error)


def _raise(error: KeyboardInterrupt) -> None:
    raise error
