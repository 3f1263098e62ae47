"""What runs on a Ray node: one server, its load generator, and the memory of its process tree."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import socket
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

import ray

from ...client import Endpoint
from ...core.records import ServerInfo
from ...engines.gpu_lock import hold_gpus
from ...engines.process import RunningServer, describe_exit
from ...engines.registry import launch
from ...settings import LaunchSettings, LockSettings
from ...specs import ServerSpec, Workload
from ...telemetry.counters import ServerProbe
from ...telemetry.memory import Guard, MemoryFigures, Sampler
from ..generator_process import generator_main
from .clock import boot_id

STOP_GRACE_S = 5.0
"""How long the generator gets to exit once its pipe closed, before it is killed (generator_pool.py's STOP_GRACE_S)."""


@dataclass(frozen=True)
class NodeIdentity:
    """Where an actor landed: the Ray node, its address, its host's boot id (one clock per boot id), this process."""

    node_id: str
    address: str
    boot_id: str | None
    hostname: str
    pid: int


@dataclass(frozen=True)
class BootedServer:
    """A server ready on a node, as the driver needs it: where to reach it, what it is, its root process there."""

    endpoint: Endpoint
    info: ServerInfo
    probe: ServerProbe | None
    pid: int


class NodeActor:
    """One server and its load generator on the node Ray placed this actor on."""

    def __init__(self, launch_settings: LaunchSettings, locks: LockSettings) -> None:
        self._launch = launch_settings
        self._locks = locks
        self._server: RunningServer | None = None
        self._held = ExitStack()
        self._generator: BaseProcess | None = None
        self._conn: Connection | None = None
        self._sampler: Sampler | None = None

    def identity(self) -> NodeIdentity:
        context = ray.get_runtime_context()
        address = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
        return NodeIdentity(context.get_node_id(), address, boot_id(), socket.gethostname(), os.getpid())

    def boot(self, spec: ServerSpec, index: int) -> BootedServer:
        """Boot the spec's `index`-th server on the GPUs Ray gave this actor, under this host's GPU lock: Ray does
        not know what else runs here."""
        gpus = tuple(int(g) for g in ray.get_gpu_ids())
        if spec.gpus:
            spec = replace(spec, gpus=gpus)
        self._held.enter_context(hold_gpus(self._locks.lock_dir, spec.gpus, self._locks.timeout_s))
        self._server = launch(spec, self._launch, index)
        return BootedServer(
            self._server.endpoint, self._server.info.copy(), self._server.probe, self._server.process.pid
        )

    def crash_report(self) -> str | None:
        """How the server died, with its log tail; None while it runs (or where this actor has none)."""
        if self._server is None or (code := self._server.process.poll()) is None:
            return None
        process = self._server.process
        return (
            f"pid {process.pid} died during the run ({describe_exit(code)})\n"
            f"--- last lines of {process.log_path} ---\n{process.log_tail()}"
        )

    def start_generator(self, endpoints: Sequence[Endpoint], workload: Workload, timeout_s: float) -> None:
        """A load generator process on this node, as generator_pool.py starts one locally ("spawn": this process has
        threads)."""
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        self._generator = context.Process(
            target=generator_main,
            args=(theirs, tuple(endpoints), workload, timeout_s),
            name="pytest-swarm-loadgen",
            daemon=True,
        )
        self._generator.start()
        theirs.close()  # so that the generator's death closes the pipe for us
        self._conn = ours

    @ray.method(concurrency_group="send")
    def send(self, message: tuple[Any, ...]) -> None:
        """One message to the generator, as the driver sent it; a generator that is gone is found out by `receive`."""
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.send(message)

    @ray.method(concurrency_group="receive")
    def receive(self, wait_s: float) -> tuple[Any, ...] | None:
        """The generator's next message, or None after `wait_s` without one; ("ended", how) once its pipe closed."""
        conn = self._conn
        try:
            if conn is None or not conn.poll(wait_s):
                return None
            message: tuple[Any, ...] = conn.recv()
            return message
        except (EOFError, OSError):
            return ("ended", self._how_generator_ended())

    def _how_generator_ended(self) -> str:
        process = self._generator
        if process is None:
            return "its load generator was never started"
        process.join(2.0)
        code = process.exitcode
        return (
            "its load generator closed its pipe but is still running"
            if code is None
            else f"its load generator ended ({describe_exit(code)})"
        )

    def stop_generator(self) -> None:
        """Close the generator's pipe (it exits when the pipe closes), then make sure: wait, then kill."""
        conn, process, self._conn, self._generator = self._conn, self._generator, None, None
        if conn is not None:
            conn.close()
        if process is not None:
            process.join(STOP_GRACE_S)
            if process.exitcode is None:
                process.kill()
                process.join(1.0)

    def kill_generator(self) -> None:
        """End a generator the driver no longer trusts (it went silent); its pipe closes and the driver hears of it."""
        if self._generator is not None and self._generator.exitcode is None:
            self._generator.kill()

    def start_memory(self, interval_s: float, guard: Guard) -> None:
        """Sample this node's server tree (and its GPUs, host memory) until stop_memory, checking the guard."""
        pid = None if self._server is None else self._server.process.pid
        self._sampler = Sampler(lambda: [pid] if pid is not None else [], interval_s, guard)
        self._sampler.start()

    def memory_breach(self) -> str | None:
        return None if self._sampler is None else self._sampler.breached

    def stop_memory(self) -> MemoryFigures | None:
        """The node's memory figures (their timeline stays here: its instants are on this node's clock)."""
        sampler, self._sampler = self._sampler, None
        if sampler is None:
            return None
        sampler.stop()
        return replace(sampler.figures(), timeline=())

    def stop(self) -> None:
        """Stop the generator and the server (its whole process group), then let go of the GPU lock."""
        try:
            self.stop_generator()
            if self._sampler is not None:
                self._sampler.stop()
            if self._server is not None:
                self._server.stop()
        finally:
            self._server = None
            self._held.close()
