"""A load generator's own process: it plays its share of each round and reports the records; it exits when its pipe
closes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from .._util.open_files import raise_soft_limit
from ..client import Endpoint, Pool
from ..core.records import RequestRecord
from ..specs import Workload
from ..telemetry.selfcheck import LoopMonitor
from .agents import AgentPlan, loop_factory, run_agents
from .bodies import Sender, senders_for
from .pacer import Pacer


@dataclass(frozen=True)
class GeneratorReport:
    """What one generator's agents did in a round, and how loaded its own event loop was meanwhile."""

    records: list[RequestRecord]
    finished: float
    """time.perf_counter() when its last agent was done: the merged wall-clock ends at the latest."""
    lag_p99_s: float | None = None
    cpu_share: float | None = None
    client_bound: bool = False
    aborted: bool = False
    ran: bool = True
    """False when it stood down before the start, because another generator was lost or Ctrl-C came."""
    connections_opened: int = 0
    """Connections its pool opened during the round."""
    connection_retries: int = 0
    """Requests it sent again on a fresh connection, their kept one found closed unanswered."""


async def receive(conn: Connection) -> Any:
    """The next message on `conn`, awaited on the loop; EOFError when closed. Blocking again once readable, since
    uvloop sets O_NONBLOCK."""
    if not conn.poll():
        loop = asyncio.get_running_loop()
        readable: asyncio.Future[None] = loop.create_future()
        fd = conn.fileno()

        def ready() -> None:
            if not readable.done():
                readable.set_result(None)

        loop.add_reader(fd, ready)
        try:
            await readable
        finally:
            loop.remove_reader(fd)
            os.set_blocking(fd, True)
    return conn.recv()


def _tell(conn: Connection, *message: Any) -> None:
    """Send to the parent; EOFError (the parent is gone, stop quietly) when its end is closed."""
    try:
        conn.send(message)
    except (BrokenPipeError, ConnectionResetError) as exc:
        raise EOFError("the parent closed its end of the pipe") from exc


def generator_main(conn: Connection, endpoints: Sequence[Endpoint], workload: Workload, timeout_s: float) -> None:
    """Play rounds until the parent closes the pipe. SIGINT is ignored, so each generator still reports; failures go
    to the parent as text."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise_soft_limit()  # spawned by the plugin it inherits the raised limit; started by Ray, it raises its own
    try:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            runner.run(_serve(conn, endpoints, workload, timeout_s))
    except EOFError:
        return  # the parent closed its end, or died: nobody is left to report to
    except BaseException:
        with contextlib.suppress(OSError):
            conn.send(("error", traceback.format_exc()))
        raise


async def _serve(conn: Connection, endpoints: Sequence[Endpoint], workload: Workload, timeout_s: float) -> None:
    pool = Pool()  # one per generator: its agents share the kept-alive connections
    senders = senders_for(endpoints, workload, timeout_s, pool)
    _tell(conn, "ready")
    try:
        while True:
            message = await receive(conn)
            if message[0] == "clock":
                _tell(conn, "clock", time.perf_counter())
            elif message[0] == "round":
                _tell(conn, "done", await _play(conn, senders, pool, workload, message[1]))
            # else a late "abort" for a round that had already ended: nothing left to stop
    finally:
        pool.close()


async def _play(
    conn: Connection, senders: Sequence[Sender], pool: Pool, workload: Workload, plans: Sequence[AgentPlan]
) -> GeneratorReport:
    """One round of this generator's agents, started at the parent's instant (open-loop arrivals count from it), ended
    early on its "abort"."""
    _tell(conn, "armed")
    message = await receive(conn)
    if message[0] != "go":  # "abort" before the start: another generator was lost, or Ctrl-C
        return GeneratorReport([], time.perf_counter(), ran=False)
    origin = message[1]
    with Pacer() as pacer:  # not asyncio.sleep: uvloop's timers wake up to a millisecond early, or late
        await pacer.until(origin)
    monitor = LoopMonitor()
    opened, retries = pool.opened, pool.retries
    records: list[RequestRecord] = []
    abort = asyncio.Event()
    listener = asyncio.ensure_future(_listen(conn, abort))
    try:
        aborted = await run_agents(senders, workload, plans, records, abort, origin)
        finished = time.perf_counter()
        load = monitor.stop()
    finally:
        listener.cancel()
        await asyncio.wait([listener])  # until it let go of the pipe: the next receive registers its own reader on it
    if listener.done() and not listener.cancelled() and listener.result():
        raise EOFError("the parent went away mid-round")
    return GeneratorReport(
        records,
        finished,
        load.lag_p99_s,
        load.cpu_share,
        load.client_bound,
        aborted is not None,
        connections_opened=pool.opened - opened,
        connection_retries=pool.retries - retries,
    )


async def _listen(conn: Connection, abort: asyncio.Event) -> bool:
    """Sets `abort` on the parent's "abort" (the only message it sends mid-round) or when it goes away; True if it went
    away."""
    try:
        await receive(conn)
    except EOFError:
        abort.set()
        return True
    abort.set()
    return False
