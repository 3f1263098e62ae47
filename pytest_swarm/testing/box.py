"""A fake box: servers of declared speed and faults, and players that make the rounds they would leave.

In the manner of pytest-xdist's `MockNode`: the box boots nothing (its pools count boots) and plays no request; its
players make the RoundRecords a server of a chosen speed and slot count would leave, with a little seeded noise, and
a server's own clock of each request. Everything else a run does, from the marker to the reports, is the plugin's own.
"""

from __future__ import annotations

import math
import random
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple, cast

import pytest

from ..client import Endpoint
from ..core.errors import BootError, BuildError, ReleaseNotFound
from ..core.records import RequestRecord, RoundConditions, RoundRecord, Schedule, ServerClock, ServerInfo
from ..engines.builds import NOT_IN_INDEX
from ..engines.pool import Servers
from ..engines.process import RunningServer, ServerProcess
from ..load.arrivals import offsets
from ..load.rounds import PairBlock, PairSide, Rounds
from ..load.trace import offsets as trace_offsets
from ..load.trace import shared_tokens
from ..run.players import Players
from ..settings import PluginSettings
from ..specs import Load, ServerSpec, Workload
from ..telemetry.gpus import GpuMemory
from ..telemetry.memory import MemoryFigures, MemorySample, summarize_memory

FIRST_TOKEN_S = 0.05
"""A request's prefill, when it finds a slot (with the round's noise and the box's slowdown)."""
DEFAULT_SPEED = 100.0
"""Tokens a second a request in a slot decodes at, for a spec the box was not told of (the default canary's, say)."""
PROMPT_TOKENS = 32
"""A user turn's prompt tokens, as the box's servers count them; a later turn of a session carries the earlier turns'
prompts and answers too."""
REQUEST_FAILED = "fake box: the server answered 500"
GUARD_ABORT = "round aborted by the guard: fake box: host available memory fell below the limit"


class Ask(NamedTuple):
    """One request's lengths: its answer's tokens, its prompt's (None: uncounted) and how many of those a prefix cache
    could serve (None: uncounted)."""

    answer: int
    prompt: int | None = None
    cacheable: int | None = None


Sends = tuple[int, Sequence[float] | None, Sequence[Ask]]
"""One server's share of a round: its agents, an open loop's instants (None: closed), and its requests' lengths."""


@dataclass(frozen=True)
class Faults:
    """What goes wrong with one spec's servers: every `fail_every`-th request fails (0: none), the server dies in its
    `crash_at_round`-th round of a boot (1 is the first; None: never), opens `slots_opened` slots whatever the spec
    asks and does not say so (None: the spec's), fails every boot with `boot_error`, has its `guard_at_round`-th
    round aborted by the memory guard, or the run is interrupted (Ctrl-C, or SIGTERM as the plugin raises it) in the
    server's `interrupt_at_round`-th round; `install_error` is what pip says when set-up installs the spec's
    release; with `cache_off` its prefix cache is off, and a session's later turns reuse nothing of the earlier
    ones."""

    fail_every: int = 0
    crash_at_round: int | None = None
    slots_opened: int | None = None
    boot_error: str | None = None
    install_error: str | None = None
    guard_at_round: int | None = None
    interrupt_at_round: int | None = None
    cache_off: bool = False


@dataclass(frozen=True)
class FakeGpus:
    """The box's GPUs: `count` of 80 GiB each, a spec up on one taking `server_mib` of it (none while asleep), another
    job holding `other_mib` of every one all along, and each GPU's `speed` against the others' (1.0 where not said): a
    server on it decodes that much faster."""

    count: int = 0
    speed: dict[int, float] = field(default_factory=dict)
    server_mib: float = 30_000.0
    other_mib: float = 0.0


@dataclass
class FakeBox:
    """A machine of fake servers: each spec's decode speed (tokens a second a slot) and faults, a `slowdown` that
    holds every server back alike, and log-normal `noise` on every round.

    A pytest plugin: `pytester.runpytest(plugins=[FakeBox(...)])`, or returned from `pytest_swarm_machine`."""

    speed: dict[ServerSpec, float] = field(default_factory=dict)
    faults: dict[ServerSpec, Faults] = field(default_factory=dict)
    slowdown: float = 1.0
    noise: float = 0.02
    cores: float = 0.0
    """Cores the servers share (0: as many as they need): with more servers up than cores, each decodes at
    cores/servers of its speed, as one-thread servers on a small machine do."""
    seed: int = 0
    boots: list[tuple[ServerSpec, int]] = field(default_factory=list)
    """Every boot a pool made: the spec and how many servers."""
    neighbour_every: int = 0
    """Every n-th pair played, a neighbour takes 1.5 cores during its first half only (0: never)."""
    pairs_spoiled: int = 0
    pairs_played: int = 0
    gpus: FakeGpus = field(default_factory=FakeGpus)
    rss_mib: float = 0.0
    """Host memory each server holds while it serves, as the sampler would read its tree (0: no samples taken)."""
    context_tokens: int | None = None
    """The context a request's prompt and answer share, as every server says it at boot (None: unsaid)."""
    clock_parts: dict[ServerSpec, tuple[str, ...]] = field(default_factory=dict)
    """The parts of a request's time a spec's server reports by its own clock, of queue, prefill and decode (all three
    where not said): ("prefill", "decode") reports as llama.cpp does, with no queue."""
    sleepers: tuple[str, ...] = ("vllm", "ollama")
    """The engines whose specs can sleep (their pools' `sleeping` says so)."""
    anywhere: tuple[str, ...] = ()
    """The engines whose pinned specs boot on every CPU; two such boots meet at a barrier of two (up to five
    seconds), or the second would wait for the first."""
    send_late_s: float = 0.0
    """How late the box's load generator sends each open-loop request after its instant (0: on time)."""
    events: list[str] = field(default_factory=list)
    """"sleep LABEL", "wake LABEL", "round LABEL", "crash LABEL" in the order they happened."""
    _together: threading.Barrier = field(default_factory=lambda: threading.Barrier(2, timeout=5.0))
    _serving: dict[str, ServerSpec] = field(default_factory=dict)
    _asleep: set[str] = field(default_factory=set)
    _up: dict[int, tuple[ServerSpec, int]] = field(default_factory=dict)
    """The spec each pool (by id) has up, and how many servers of it."""
    _rounds_played: Counter[str] = field(default_factory=Counter)
    """Rounds each server (by URL) has played since its boot."""
    _dead: dict[str, str] = field(default_factory=dict)
    """The servers (by URL) that died, and how."""

    def __post_init__(self) -> None:
        self._draw = random.Random(self.seed)

    @pytest.hookimpl
    def pytest_swarm_machine(self, config: pytest.Config) -> FakeBox:
        """The plugin's hook (hookspecs.py): the run measures on this box."""
        return self

    def players(self) -> Players:
        return self

    def pools(self, settings: PluginSettings) -> tuple[Servers, Servers]:
        return FakePool(self), FakePool(self)

    def check_installed(self, spec: ServerSpec, settings: PluginSettings) -> None:
        """Every engine is installed on the box: it serves any spec."""

    def prepare(self, spec: ServerSpec, say: Callable[[str], None] | None) -> None:
        """Every release a spec names is there already, unless its faults say it cannot be installed: the box notes
        the spec."""
        self.events.append(f"prepared {spec.label}")
        failed = self.faults.get(spec, Faults()).install_error
        if failed is not None:  # pip's words decide, as engines/builds.py reads them
            error = ReleaseNotFound if NOT_IN_INDEX in failed else BuildError
            raise error(f"fake box: {spec.label} could not be installed: {failed}")

    def alike(self, specs: Sequence[ServerSpec], settings: PluginSettings) -> tuple[list[ServerSpec], str | None]:
        """The box's servers add nothing of their own: they boot as given."""
        return list(specs), None

    def speed_of(self, spec: ServerSpec) -> float:
        """A spec the box was not told of decodes at DEFAULT_SPEED; the same spec booted on other GPUs (a crossover)
        is the same server."""
        known = next(
            (v for k, v in self.speed.items() if k == spec or replace(k, gpus=spec.gpus) == spec), DEFAULT_SPEED
        )
        for gpu in spec.gpus:
            known *= self.gpus.speed.get(gpu, 1.0)
        return known

    def devices(self) -> tuple[GpuMemory, ...]:
        """What NVML would say: each GPU's memory, less what the specs up and awake on it take."""
        used = dict.fromkeys(range(self.gpus.count), self.gpus.other_mib)
        for spec, _count in self._up.values():
            if spec.label not in self._asleep:
                for gpu in spec.gpus:
                    used[gpu] += self.gpus.server_mib
        return tuple(GpuMemory(gpu, 80_000.0, 80_000.0 - taken) for gpu, taken in used.items())

    def round_of(
        self,
        endpoints: Sequence[Endpoint],
        load: Load,
        workload: Workload,
        boot: int,
        pair: int | None = None,
        busy: float = 0.0,
    ) -> RoundRecord:
        """One round on each server: a closed loop's agents as many at once as slots, the rest queued in waves, each
        agent's requests (its sessions' turns) one after another; an open loop's arrivals (a trace's requests) at
        their instants, dealt to the servers in turn, each queued for the first slot free. Faults applied, cores
        shared."""
        decode_luck = math.exp(self._draw.gauss(0.0, self.noise))  # the round's luck, shared by its servers
        prefill_luck = math.exp(self._draw.gauss(0.0, self.noise))
        arrivals, asks = _arrivals(load, workload)
        requests, guarded = [], False
        for worker, endpoint in enumerate(endpoints):
            if arrivals is None:
                sends: Sends = (load.concurrency, None, asks)
            else:
                due = arrivals[worker :: len(endpoints)]
                sends = (len(due), due, asks[worker :: len(endpoints)])
            requests += self._requests(endpoint, worker, sends, workload, decode_luck, prefill_luck)
            spec = self._serving[endpoint.base_url]
            guarded |= self.faults.get(spec, Faults()).guard_at_round == self._rounds_played[endpoint.base_url]
        if guarded:  # the guard cancels what is still running, the later half, each keeping what it received
            for request in requests[len(requests) // 2 :]:
                request.error = "cancelled: the round was aborted"
        return RoundRecord(
            concurrency=load.concurrency * len(endpoints),
            wall_s=max(r.end for r in requests),
            requests=requests,
            boot=boot,
            conditions=RoundConditions(other_cpu_cores=busy),
            pair=pair,
            aborted=GUARD_ABORT if guarded else None,
        )

    def _requests(
        self,
        endpoint: Endpoint,
        worker: int,
        sends: Sends,
        workload: Workload,
        decode_luck: float,
        prefill_luck: float,
    ) -> list[RequestRecord]:
        """One server's requests of the round, from its `sends`: each with its lengths, and what of its prompt the
        server's prefix cache serves unless it is off."""
        url = endpoint.base_url
        spec = self._serving[url]
        assert spec.label not in self._asleep, f"a round on {spec.label}, asleep"
        assert url not in self._dead, f"a round on {spec.label}, dead"
        self.events.append(f"round {spec.label}")
        self._rounds_played[url] += 1
        faults = self.faults.get(spec, Faults())
        if faults.interrupt_at_round == self._rounds_played[url]:
            raise KeyboardInterrupt("fake box: interrupted")
        crashing = faults.crash_at_round == self._rounds_played[url]
        slots = faults.slots_opened or spec.slots
        up = sum(count for _spec, count in self._up.values())
        shared = min(1.0, self.cores / up) if self.cores else 1.0
        speed = self.speed_of(spec) * shared / self.slowdown * decode_luck
        prefill_s = FIRST_TOKEN_S * self.slowdown * prefill_luck
        agents, due, asks = sends
        count = len(asks)
        timed = _timed(agents, slots, [prefill_s + ask.answer / speed for ask in asks], due, self.send_late_s)
        requests = []
        for index, (rank, start, queued) in enumerate(timed):
            first = start + queued + prefill_s
            schedule = None if due is None else Schedule(due[index])
            session, turn = divmod(index // agents, workload.turns) if due is None else (0, 0)
            ask = asks[index]
            tokens = ask.answer
            failed = (faults.fail_every and (index + 1) % faults.fail_every == 0) or (crashing and index >= count // 2)
            if failed:
                error = "fake box: the server closed the connection" if crashing else REQUEST_FAILED
                requests.append(
                    RequestRecord(
                        agent=worker * agents + rank,
                        start=start,
                        worker=worker,
                        end=first,
                        error=error,
                        schedule=schedule,
                        session=rank * workload.prompts_per_agent + session,
                        turn=turn,
                    )
                )
                continue
            times = [first + i / speed for i in range(tokens)]
            decode_s = times[-1] - times[0]  # first token to last, as the engines time it
            parts = self.clock_parts.get(spec, ("queue", "prefill", "decode"))
            clock = ServerClock(
                engine="fake",
                queue_s=queued if "queue" in parts else None,
                prefill_s=prefill_s if "prefill" in parts else None,
                decode_s=decode_s if "decode" in parts else None,
                decoded_n=tokens,
            )
            requests.append(
                RequestRecord(
                    agent=worker * agents + rank,
                    start=start,
                    worker=worker,
                    end=times[-1],
                    token_times=times,
                    output_tokens=tokens,
                    usage_reported=True,
                    server_clock=clock,
                    schedule=schedule,
                    session=rank * workload.prompts_per_agent + session,
                    turn=turn,
                    prompt_tokens=ask.prompt,
                    cached_prompt_tokens=0 if faults.cache_off and ask.cacheable is not None else ask.cacheable,
                )
            )
        if crashing:
            self._dead[url] = f"fake box: {spec.label} was killed by signal 9 during round {self._rounds_played[url]}"
            self.events.append(f"crash {spec.label}")
        return requests

    def rounds(self, asked: Rounds) -> tuple[list[RoundRecord], MemoryFigures | None]:
        """The players' protocol (run/players.py): `asked.load.rounds` rounds of the fake server, into the sink,
        until one in which it died."""
        played = []
        for _round in range(asked.load.rounds):
            record = self.round_of(asked.endpoints, asked.load, asked.workload, asked.boot)
            played.append(record)
            asked.sink.append(record)
            if asked.on_round is not None:
                asked.on_round(record)
            if record.aborted or any(endpoint.base_url in self._dead for endpoint in asked.endpoints):
                break
        return played, self._memory(len(asked.endpoints), [r.wall_s for r in played])

    def _memory(self, servers: int, walls: Sequence[float]) -> MemoryFigures | None:
        """The sampler's figures over rounds of `walls` seconds: the servers' declared RSS, flat, a sample a round's
        start and end; None where the box declares no memory."""
        if not self.rss_mib:
            return None
        held, t, samples = self.rss_mib * servers, 0.0, []
        for wall in walls:
            samples += [MemorySample(t, held, None, None, 16_384.0), MemorySample(t + wall, held, None, None, 16_384.0)]
            t += wall
        return summarize_memory(samples, "fake box: no NVML", None)

    def pairs(self, sides: Sequence[PairSide], block: PairBlock) -> int:
        """`block.wanted` pairs that count, a round a side each, a pair the block calls spoiled played again; none
        after a server died."""
        counted = played = 0
        while counted < block.wanted and played < block.limit:
            played += 1
            self.pairs_played += 1
            neighbour = self.neighbour_every and self.pairs_played % self.neighbour_every == 0
            rounds = []
            for index, s in enumerate(sides):
                if s.turn is not None:  # as run_pairs does: the other side asleep, this one awake
                    s.turn()
                busy = 1.5 if neighbour and index == 0 else 0.0
                rounds.append(
                    self.round_of(s.endpoints, s.load, s.workload, block.boot, block.first_pair + counted, busy)
                )
                if any(endpoint.base_url in self._dead for endpoint in s.endpoints):
                    s.sink.append(rounds[-1])
                    return counted
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
        if spec == self.spec and not fresh and len(self.servers) == count and self.crash_report() is None:
            return self.servers
        self.stop()
        if spec.engine in self.box.anywhere and spec.cpus:
            self.box._together.wait()  # BrokenBarrierError where the other side does not boot at the same time
            self.box.events.append(f"booted anywhere {spec.label}")
        faults = self.box.faults.get(spec, Faults())
        if faults.boot_error is not None:
            raise BootError(f"fake box: {spec.label}: {faults.boot_error}")
        free = {d.index: d.free_mib for d in self.box.devices()}
        assert all(free[gpu] >= self.box.gpus.server_mib for gpu in spec.gpus), f"{spec.label} booted on a full GPU"
        self.box.boots.append((spec, count))
        self.box._up[id(self)] = (spec, count)
        self.spec, self.servers = spec, []
        for _index in range(count):
            url = f"http://127.0.0.1:9/{len(self.box._serving)}"
            self.box._serving[url] = spec
            process = cast(ServerProcess, None)  # never stopped: stop() below lets go of the list
            info = ServerInfo(
                engine_version=f"fake box ({spec.engine})",
                slots=spec.slots,
                slots_check="server" if faults.slots_opened is None else "measured",
                context_tokens=self.box.context_tokens,
            )
            self.servers.append(RunningServer(Endpoint(url, spec.model, "openai"), process, info))
        return self.servers

    def crash_report(self) -> str | None:
        died = [self.box._dead[s.endpoint.base_url] for s in self.servers if s.endpoint.base_url in self.box._dead]
        return "; ".join(died) or None

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


def _arrivals(load: Load, workload: Workload) -> tuple[list[float] | None, list[Ask]]:
    """A round's send instants (None: a closed loop's agents send as they go) and its requests' lengths, in order. A
    session's later turns carry the earlier turns' prompts and answers, which a warm workload lets the cache serve; a
    trace's requests their own lengths and the blocks they share with earlier ones. The box counts prompts of those
    two only."""
    trace = None if load.open_loop is None else load.open_loop.trace
    if trace is not None:
        assert all(r.parent_id is None for r in trace.requests), "the fake box replays traces without sessions"
        shared = shared_tokens(trace)
        asks = [Ask(r.output_length, r.input_length, s) for r, s in zip(trace.requests, shared, strict=True)]
        return trace_offsets(trace), asks
    tokens = workload.max_tokens
    assert tokens is not None, "the fake box answers pinned lengths (max_tokens=)"
    if load.open_loop is not None:
        arrivals = offsets(load.open_loop)
        return arrivals, [Ask(tokens)] * len(arrivals)
    if workload.turns == 1:
        return None, [Ask(tokens)] * (load.concurrency * workload.prompts_per_agent)
    turns = []
    for turn in range(workload.turns):
        earlier = turn * (PROMPT_TOKENS + tokens)
        turns.append(Ask(tokens, earlier + PROMPT_TOKENS, earlier if workload.cache == "warm" else 0))
    sent = workload.prompts_per_agent * workload.turns  # each agent's, in step with the others
    return None, [turns[i % workload.turns] for i in range(sent) for _agent in range(load.concurrency)]


def _timed(
    agents: int, slots: int, units: Sequence[float], due: Sequence[float] | None, late_s: float
) -> list[tuple[int, float, float]]:
    """Each request's (agent, start, seconds queued for a slot), from the seconds each takes in a slot. A closed loop
    plays turn by turn, each turn's agents served in waves of `slots`; an open loop sends each request `late_s` after
    its instant, to the first slot free."""
    if due is None:
        turn_s = -(-agents // slots) * max(units, default=0.0)
        return [
            (rank, turn * turn_s, (rank // slots) * units[i])
            for i, (turn, rank) in enumerate(divmod(i, agents) for i in range(len(units)))
        ]
    free = [0.0] * slots
    timed: list[tuple[int, float, float]] = []
    for instant, unit_s in zip(due, units, strict=True):
        start = instant + late_s
        slot = min(range(slots), key=free.__getitem__)
        queued = max(0.0, free[slot] - start)
        free[slot] = start + queued + unit_s
        timed.append((len(timed), start, queued))
    return timed
