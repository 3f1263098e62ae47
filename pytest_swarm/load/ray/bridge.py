"""The load-generator protocol between the driver and Ray nodes, on the driver's time line; the local round logic
runs unchanged."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import threading
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

import ray

from ...client import Endpoint
from ...core.errors import ClockError, LoadGenError
from ...core.records import RoundRecord
from ...specs import Load, Workload
from ..agents import AgentPlan
from ..generator_pool import STARTUP_TIMEOUT_S, Generators, LoadGenerator
from .clock import CLOCK_SAMPLES, ClockSample, NodeClock, node_clock, on_driver_clock

POLL_S = 0.2
"""How long one receive call waits on the node: the bridge notices a closed pipe within this."""


class Bridge:
    """Two threads between the driver's pipe and a generator on a node; either closing closes both, and `why` keeps
    the reason."""

    def __init__(self, conn: Connection, actor: Any, node: str) -> None:
        self.conn = conn
        self.actor = actor
        self.node = node
        self.clock: NodeClock | None = None
        """Set once the round trips measured it; before that clock readings pass as they are."""
        self.why: str | None = None
        self._closed = threading.Event()
        self._threads = [
            threading.Thread(target=self._down, name=f"pytest-swarm-ray-down-{node}", daemon=True),
            threading.Thread(target=self._up, name=f"pytest-swarm-ray-up-{node}", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _down(self) -> None:
        """The driver's messages to the node, in order; the pipe is closed here, and only here, at the end."""
        try:
            while not self._closed.is_set():
                if not self.conn.poll(POLL_S):
                    continue
                message = self.conn.recv()
                if message[0] == "go" and self.clock is not None:
                    message = ("go", self.clock.to_node(message[1]))
                ray.get(self.actor.send.remote(message))
        except EOFError:
            pass  # the driver closed its end: the generator is done with
        except ray.exceptions.RayError as exc:
            self._lose(exc)
        finally:
            self._closed.set()
            self.conn.close()
            with contextlib.suppress(ray.exceptions.RayError):
                self.actor.stop_generator.remote()

    def _up(self) -> None:
        """The generator's messages to the driver, reports moved onto its clock; a dead node ends the pipe."""
        try:
            while not self._closed.is_set():
                message = ray.get(self.actor.receive.remote(POLL_S))
                if message is None:
                    continue
                if message[0] == "ended":
                    self.why = self.why or str(message[1])
                    break
                if message[0] == "done" and self.clock is not None:
                    message = ("done", on_driver_clock(message[1], self.clock, self.node))
                with contextlib.suppress(OSError):
                    self.conn.send(message)
        except ray.exceptions.RayError as exc:
            self._lose(exc)
        finally:
            self._closed.set()

    def _lose(self, exc: BaseException) -> None:
        if self.why is None:
            lines = str(exc).strip().splitlines()
            self.why = f"its Ray node died or became unreachable ({type(exc).__name__}: {lines[0] if lines else ''})"

    def join(self, timeout_s: float) -> None:
        self._closed.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))


class RemoteGenerator(LoadGenerator):
    """A LoadGenerator whose process runs on a Ray node: named with its node, ended as its bridge saw it end."""

    def __init__(self, index: int, count: int, conn: Connection, bridge: Bridge) -> None:
        super().__init__(index, count, None, conn)
        self.bridge = bridge

    @property
    def name(self) -> str:
        return f"load generator {self.index} of {self.count} on Ray node {self.bridge.node}"

    async def ended(self) -> str:
        """Why the bridge closed: the node's death or the generator's exit, waiting up to 2 s for the reason."""
        deadline = time.perf_counter() + 2.0
        while self.bridge.why is None and time.perf_counter() < deadline:
            await asyncio.sleep(0.01)
        return f"{self.name}: {self.bridge.why or 'it closed its pipe'}"

    def kill(self) -> None:
        with contextlib.suppress(ray.exceptions.RayError):
            self.bridge.actor.kill_generator.remote()


class RayGenerators(Generators):
    """Generators on Ray nodes, one per actor given, played as local ones; `clocks` holds each node's clock once
    started."""

    def __init__(
        self, endpoints: Sequence[Endpoint], workload: Workload, load: Load, actors: Sequence[tuple[Any, str]]
    ) -> None:
        super().__init__(endpoints, workload, load)
        self._actors = list(actors)
        self._count = len(self._actors)
        self._shared = [False] * self._count
        self.bridges: list[Bridge] = []
        self.clocks: dict[str, NodeClock] = {}

    def shared_clocks(self, shared: Sequence[bool]) -> RayGenerators:
        """Which actors run on the driver's host (same boot id), so read its clock: set before entering."""
        self._shared = list(shared)
        return self

    async def _start(self) -> None:
        """Start every node's generator (their imports overlap), then wait for each, and measure its node's clock."""
        for index, (actor, node) in enumerate(self._actors):
            ours, theirs = multiprocessing.Pipe()
            await actor.start_generator.remote(self._endpoints, self._workload, self._timeout_s)
            bridge = Bridge(theirs, actor, node)
            self.bridges.append(bridge)
            self.generators.append(RemoteGenerator(index, self._count, ours, bridge))
        for generator, bridge, shared in zip(self.generators, self.bridges, self._shared, strict=True):
            await generator.expect("ready", STARTUP_TIMEOUT_S)
            samples = []
            for _ in range(CLOCK_SAMPLES):
                sent = time.perf_counter()
                generator.send("clock", sent)
                theirs_now = float(await generator.expect("clock", STARTUP_TIMEOUT_S))
                samples.append(ClockSample(sent, theirs_now, time.perf_counter()))
            try:
                bridge.clock = node_clock(bridge.node, samples, shared)
            except ClockError as exc:
                raise LoadGenError(str(exc)) from None
            self.clocks[bridge.node] = bridge.clock

    async def play(
        self,
        plans: Sequence[AgentPlan],
        boot: int = 0,
        abort: asyncio.Event | None = None,
        sink: list[RoundRecord] | None = None,
    ) -> RoundRecord:
        """Generators.play, with the node named on the requests a lost generator never reported (agent i was generator i
        mod K's)."""
        played: list[RoundRecord] = []
        try:
            return await super().play(plans, boot, abort, played)
        finally:
            for record in (r for round_ in played for r in round_.requests if r.node is None):
                record.node = self.bridges[record.agent % len(self.bridges)].node
            if sink is not None:
                sink.extend(played)

    def stop(self) -> None:
        """Close every pipe (each bridge then stops its node's generator), and wait for the bridges."""
        super().stop()
        for bridge in self.bridges:
            bridge.join(POLL_S * 2 + 5.0)
        self.bridges = []
