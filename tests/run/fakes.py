"""Fake servers and players for the fast tests of run/: the orchestration core driven without a process or a socket.

In the manner of pytest-xdist's `MockNode`: `FakeBox` stands for the machine, its pools boot nothing (they count
boots), and its players (run/players.py) make the RoundRecords a server of a chosen speed and slot count would
leave, with a little seeded noise. The search, the canary and the gate under test are the real ones.
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from pytest_swarm.client import Endpoint
from pytest_swarm.core.records import RequestRecord, RoundConditions, RoundRecord
from pytest_swarm.engines.process import RunningServer, ServerProcess
from pytest_swarm.load.rounds import PairBlock, PairSide, Rounds
from pytest_swarm.marker.parse import parse_marker
from pytest_swarm.results.item import ItemResult
from pytest_swarm.run.measuring import MeasuringSession
from pytest_swarm.run.players import Players
from pytest_swarm.settings import LaunchSettings, PluginSettings
from pytest_swarm.specs import PlannedItem, ServerSpec
from pytest_swarm.telemetry.gpus import GpuMemory
from pytest_swarm.telemetry.hardware import HardwareProfile
from pytest_swarm.telemetry.memory import MemoryFigures

FIRST_TOKEN_S = 0.05
"""A request's prefill, when it finds a slot."""


@dataclass
class FakeBox:
    """A machine of fake servers: each spec's decode speed (tokens a second for a request in a slot), a `slowdown`
    that holds every server back alike (a runner's drift), and a spread of `noise` (log-normal) on every round."""

    speed: dict[ServerSpec, float]
    slowdown: float = 1.0
    noise: float = 0.02
    seed: int = 0
    boots: list[tuple[ServerSpec, int]] = field(default_factory=list)
    """Every boot a pool made: the spec and how many servers."""
    neighbour_every: int = 0
    """Every n-th pair played, a neighbour takes 1.5 cores during its first half only (0: never)."""
    pairs_spoiled: int = 0
    pairs_played: int = 0
    gpus: int = 0
    """GPUs on the box (80 GiB each); a spec up on one takes `gpu_mib` of it, none while asleep."""
    gpu_speed: dict[int, float] = field(default_factory=dict)
    """A GPU's speed against the others' (1.0 where not said): a server on it decodes that much faster."""
    gpu_mib: float = 30_000.0
    other_mib: float = 0.0
    """Memory another job holds on every GPU, all along."""
    sleepers: tuple[str, ...] = ("vllm", "ollama")
    """The engines whose specs can sleep (their pools' `sleeping` says so)."""
    anywhere: tuple[str, ...] = ()
    """The engines whose pinned specs boot on every CPU (their pools' `anywhere` says so); two such boots must meet,
    or the second would wait for the first: each waits for the other (a barrier of two) for up to five seconds."""
    _together: threading.Barrier = field(default_factory=lambda: threading.Barrier(2, timeout=5.0))
    events: list[str] = field(default_factory=list)
    """"sleep LABEL", "wake LABEL", "round LABEL" in the order they happened."""
    _serving: dict[str, ServerSpec] = field(default_factory=dict)
    _asleep: set[str] = field(default_factory=set)
    _up: dict[int, ServerSpec] = field(default_factory=dict)
    """The spec each pool (by id) has up."""

    def __post_init__(self) -> None:
        self._draw = random.Random(self.seed)

    def speed_of(self, spec: ServerSpec) -> float:
        """A spec the box was not told of (the default canary) decodes at 100 tok/s; the same spec booted on other GPUs
        (a crossover) is the same server."""
        known = next((v for k, v in self.speed.items() if k == spec or replace(k, gpus=spec.gpus) == spec), 100.0)
        for gpu in spec.gpus:
            known *= self.gpu_speed.get(gpu, 1.0)
        return known

    def devices(self) -> tuple[GpuMemory, ...]:
        """What NVML would say: each GPU's memory, less what the specs up and awake on it take."""
        used = dict.fromkeys(range(self.gpus), self.other_mib)
        for spec in self._up.values():
            if spec.label not in self._asleep:
                for gpu in spec.gpus:
                    used[gpu] += self.gpu_mib
        return tuple(GpuMemory(gpu, 80_000.0, 80_000.0 - taken) for gpu, taken in used.items())

    def round_of(
        self, endpoint: Endpoint, agents: int, tokens: int, boot: int, pair: int | None = None, busy: float = 0.0
    ) -> RoundRecord:
        """One round: `agents` requests of `tokens` tokens, as many at once as the spec has slots, the rest queued a
        whole answer per wave."""
        spec = self._serving[endpoint.base_url]
        assert spec.label not in self._asleep, f"a round on {spec.label}, asleep"
        self.events.append(f"round {spec.label}")
        speed = self.speed_of(spec) / self.slowdown * math.exp(self._draw.gauss(0.0, self.noise))
        answer_s = tokens / speed
        requests = []
        for agent in range(agents):
            first = FIRST_TOKEN_S + (agent // spec.slots) * answer_s
            times = [first + i * answer_s / tokens for i in range(tokens)]
            requests.append(
                RequestRecord(
                    agent=agent, start=0.0, end=times[-1], token_times=times, output_tokens=tokens, usage_reported=True
                )
            )
        wall = max(r.end for r in requests)
        return RoundRecord(
            concurrency=agents,
            wall_s=wall,
            requests=requests,
            boot=boot,
            conditions=RoundConditions(other_cpu_cores=busy),
            pair=pair,
        )

    def pool(self) -> FakePool:
        return FakePool(self)

    def players(self) -> Players:
        return self

    def rounds(self, asked: Rounds) -> tuple[list[RoundRecord], MemoryFigures | None]:
        """The players' protocol (run/players.py): `asked.load.rounds` rounds of the fake server, into the sink."""
        played = []
        for _round in range(asked.load.rounds):
            tokens = asked.workload.max_tokens
            assert tokens is not None, "the fake server answers pinned lengths"
            record = self.round_of(asked.endpoints[0], asked.load.concurrency, tokens, asked.boot)
            played.append(record)
            asked.sink.append(record)
            if asked.on_round is not None:
                asked.on_round(record)
        return played, None

    def pairs(self, sides: Sequence[PairSide], block: PairBlock) -> int:
        """`block.wanted` pairs that count, a round a side each, a pair the block calls spoiled played again."""
        counted = played = 0
        while counted < block.wanted and played < block.limit:
            played += 1
            self.pairs_played += 1
            neighbour = self.neighbour_every and self.pairs_played % self.neighbour_every == 0
            rounds = []
            for index, s in enumerate(sides):
                if s.turn is not None:  # as run_pairs does: the other side asleep, this one awake
                    s.turn()
                rounds.append(
                    self.round_of(
                        s.endpoints[0],
                        s.load.concurrency,
                        s.workload.max_tokens or 0,
                        block.boot,
                        block.first_pair + counted,
                        1.5 if neighbour and index == 0 else 0.0,
                    )
                )
            if block.spoiled(rounds[0], rounds[1]):
                self.pairs_spoiled += 1
                continue
            for side, record in zip(sides, rounds, strict=True):
                side.sink.append(record)
            counted += 1
        return counted


@dataclass
class FakePool:
    """A pool that boots nothing: it hands out servers its box serves, and counts the boots."""

    box: FakeBox
    spec: ServerSpec | None = None
    servers: list[RunningServer] = field(default_factory=list)

    def get(self, spec: ServerSpec, count: int = 1, fresh: bool = False, resize: bool = False) -> list[RunningServer]:
        if spec == self.spec and not fresh and len(self.servers) == count:
            return self.servers
        self.stop()
        if spec.engine in self.box.anywhere and spec.cpus:
            self.box._together.wait()  # BrokenBarrierError where the other side does not boot at the same time
            self.box.events.append(f"booted anywhere {spec.label}")
        free = {d.index: d.free_mib for d in self.box.devices()}
        assert all(free[gpu] >= self.box.gpu_mib for gpu in spec.gpus), f"{spec.label} booted on a full GPU"
        self.box.boots.append((spec, count))
        self.box._up[id(self)] = spec
        self.spec, self.servers = spec, []
        for _index in range(count):
            url = f"http://127.0.0.1:9/{len(self.box._serving)}"
            self.box._serving[url] = spec
            process = cast(ServerProcess, None)  # never stopped: stop() below lets go of the list
            self.servers.append(RunningServer(Endpoint(url, spec.model, "openai"), process, {"slots": spec.slots}))
        return self.servers

    def crash_report(self) -> str | None:
        return None

    def pids(self) -> list[int]:
        return []

    def stop(self) -> None:
        if self.spec is not None:
            self.box._asleep.discard(self.spec.label)
        self.box._up.pop(id(self), None)
        self.spec, self.servers = None, []

    def sleeping(self, spec: ServerSpec) -> ServerSpec | None:
        return spec if spec.engine in self.box.sleepers else None

    def anywhere(self, spec: ServerSpec) -> ServerSpec | None:
        return spec if spec.engine in self.box.anywhere and spec.cpus else None

    def sleep(self, pause: bool = False) -> None:
        assert self.spec is not None and self.spec.label not in self.box._asleep
        assert pause or self.spec.engine in self.box.sleepers, f"{self.spec.label} cannot sleep"
        self.box._asleep.add(self.spec.label)
        self.box.events.append(f"sleep {self.spec.label}")

    def wake(self) -> None:
        if self.spec is not None and self.spec.label in self.box._asleep:
            self.box._asleep.discard(self.spec.label)
            self.box.events.append(f"wake {self.spec.label}")


def session(
    box: FakeBox, tmp_path: Path, items: Sequence[PlannedItem], *, update_baselines: bool = False, **settings: Any
) -> MeasuringSession:
    """The run's measuring session of `items` on the box, its baselines in `tmp_path`, no history."""
    plugin = PluginSettings(
        LaunchSettings(log_dir=tmp_path / "logs"),
        baseline_dir=tmp_path,
        update_baselines=update_baselines,
        **settings,
    )
    return MeasuringSession(
        plugin, HardwareProfile("testbox", {}), tmp_path, items, box.players(), (box.pool(), box.pool()), box.devices
    )


def planned(level: int, **marker: Any) -> PlannedItem:
    """A collected item of the marker at `level` agents, as the plugin plans it."""
    config = parse_marker((), marker)
    return PlannedItem("test_x.py::test_item", "test_x.py::test_item", config, level, config.load(level))


def measure(measuring: MeasuringSession, item: PlannedItem) -> ItemResult:
    """What the fixture and the runtest hooks do with an item: measure it, judge it, end it."""
    concluded = measuring.conclude(measuring.measure(item))
    measuring.ended(item.nodeid)
    return concluded
