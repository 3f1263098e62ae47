"""SIGTERM becomes a KeyboardInterrupt that reaches the measuring code, even when it lands inside a protocol
callback of a running event loop (where uvloop would swallow it: CI saw a SIGTERM fail one request and the run go
on)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from collections.abc import Callable, Iterator

import pytest
import uvloop

from pytest_swarm._util.sigterm import interrupt, stop_on_sigterm


@pytest.fixture
def sigterm_handler() -> Iterator[None]:
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _SignalledOnData(asyncio.Protocol):
    """Sends this process SIGTERM from inside `data_received`: its handler runs at the next bytecode, here."""

    def __init__(self) -> None:
        self.received = 0

    def data_received(self, data: bytes) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        self.received += len(data)


async def _signal_inside_a_callback() -> str:
    ours, theirs = socket.socketpair()
    with theirs:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_connection(_SignalledOnData, sock=ours)
        theirs.sendall(b"x")
        await asyncio.sleep(3)  # the interrupt must end the run long before this
        transport.close()
    return "the interrupt was swallowed"


@pytest.mark.parametrize("loop_factory", [uvloop.new_event_loop, asyncio.new_event_loop], ids=["uvloop", "asyncio"])
@pytest.mark.usefixtures("sigterm_handler")
def test_a_sigterm_inside_a_protocol_callback_ends_the_loop_with_keyboard_interrupt(
    loop_factory: Callable[[], asyncio.AbstractEventLoop],
) -> None:
    with (
        asyncio.Runner(loop_factory=loop_factory) as runner,
        pytest.raises(KeyboardInterrupt, match="pytest-swarm: received SIGTERM"),
    ):
        runner.run(asyncio.wait_for(_signal_inside_a_callback(), 10))


@pytest.mark.usefixtures("sigterm_handler")
def test_a_sigterm_outside_any_loop_raises_where_it_lands() -> None:
    with pytest.raises(KeyboardInterrupt, match="pytest-swarm: received SIGTERM"):
        signal.raise_signal(signal.SIGTERM)  # runs the handler before it returns


def test_the_handler_is_installed_until_cleanup_and_never_over_someone_elses() -> None:
    cleanups: list[Callable[[], None]] = []
    installed = signal.signal(signal.SIGTERM, signal.SIG_DFL)  # this pytest's own session installed it
    try:
        _install_and_clean_up(cleanups)
    finally:
        signal.signal(signal.SIGTERM, installed)


def _install_and_clean_up(cleanups: list[Callable[[], None]]) -> None:
    stop_on_sigterm(cleanups.append)
    assert signal.getsignal(signal.SIGTERM) is interrupt
    (cleanup,) = cleanups
    cleanup()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL

    def theirs(signum: int, frame: object) -> None:
        pass

    previous = signal.signal(signal.SIGTERM, theirs)
    try:
        stop_on_sigterm(cleanups.append)
        assert signal.getsignal(signal.SIGTERM) is theirs and len(cleanups) == 1
    finally:
        signal.signal(signal.SIGTERM, previous)
