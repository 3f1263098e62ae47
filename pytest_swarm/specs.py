"""What to boot, what to send, and how: plain frozen dataclasses, validated on creation.

Specs are hashable on purpose: the plugin keys its server pool and its ordering of
items on them, so two markers that name the same server share one boot. The engine
specs (LlamaCppSpec, VllmSpec, ...) subclass ServerSpec in their engine's module
(engines/); this module holds what every stage shares and imports nothing heavier
than the figure names.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from .affinity import cpu_list, cpus_problem
from .errors import SwarmError
from .figure_names import DEFAULT_GATE, DEFAULT_TOLERANCE
from .limits import NO_FAILURES, Limit

EMBEDDED_MODEL = "gemma3-270m"
"""The model every machine has once the `embedded` extra is installed."""


class SpecError(SwarmError, ValueError):
    """A spec or a marker argument that cannot describe a real experiment."""


def positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(f"{name} must be a positive int, got {value!r}")
    return value


def optional_positive(name: str, value: Any) -> None:
    if value is not None:
        positive_int(name, value)


def optional_str(name: str, value: Any) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise SpecError(f"{name} must be a non-empty str or None, got {value!r}")


def optional_fraction(name: str, value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1):
        raise SpecError(f"{name} must be a fraction in (0, 1] or None, got {value!r}")


def optional_bool(name: str, value: Any) -> None:
    if value not in (None, True, False):
        raise SpecError(f"{name} must be True, False or None, got {value!r}")


def gpus_for(tensor_parallel: int, gpus: tuple[int, ...]) -> tuple[int, ...]:
    """The GPUs a tensor-parallel server takes: the ones named, or the first `tensor_parallel`.

    Naming them always means CUDA_VISIBLE_DEVICES is set and the cross-process GPU
    lock is taken, so two jobs never share a device unknowingly.
    """
    if not gpus:
        return tuple(range(tensor_parallel))
    if len(gpus) < tensor_parallel:
        raise SpecError(f"tensor_parallel={tensor_parallel} needs at least that many gpus, got gpus={list(gpus)}")
    return gpus


def str_tuple(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise SpecError(f"{name} must be a sequence of str (one argv item each), got {value!r}")
    return tuple(value)


def _distinct_indices(values: tuple[Any, ...]) -> bool:
    return all(not isinstance(v, bool) and isinstance(v, int) and v >= 0 for v in values) and len(set(values)) == len(values)


def _env_pairs(value: Any) -> tuple[tuple[str, str], ...]:
    items = value.items() if isinstance(value, dict) else value
    return tuple(sorted((str(k), str(v)) for k, v in items))


@dataclass(frozen=True)
class ServerSpec:
    """An engine serving a model with a number of parallel slots.

    `extra_args` and `env` carry whatever the named parameters do not cover, so a
    spec never has to grow a field before a user can try an engine flag. `cpus`
    pins the server's process tree to those CPUs and the harness to the others
    while it runs (affinity.py); it is part of the label, so a pinned server's
    figures never land in an unpinned one's baseline.
    """

    engine: str
    model: str
    slots: int = 1
    extra_args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    gpus: tuple[int, ...] = ()
    cpus: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        positive_int("slots", self.slots)
        gpus = tuple(self.gpus)
        if not _distinct_indices(gpus):
            raise SpecError(f"gpus must be distinct GPU indices (ints >= 0), got {self.gpus!r}")
        object.__setattr__(self, "gpus", gpus)
        cpus = tuple(self.cpus)
        if not _distinct_indices(cpus):
            raise SpecError(f"cpus must be distinct CPU indices (ints >= 0) such as cpus=[1], got {self.cpus!r}")
        object.__setattr__(self, "cpus", tuple(sorted(cpus)))  # the order means nothing to a CPU mask: one spec, one hash
        object.__setattr__(self, "extra_args", str_tuple("extra_args", self.extra_args))
        object.__setattr__(self, "env", _env_pairs(self.env))
        if not self.model:
            raise SpecError("model must be a non-empty name or path")
        problem = cpus_problem(self.cpus) if self.cpus else None
        if problem:
            raise SpecError(f"{self.label}: {problem}")

    @property
    def label(self) -> str:
        """Short human name for tables: engine, model and slots, and the CPUs it is pinned to."""
        model = Path(self.model).name if "/" in self.model else self.model
        return f"{self.engine}:{model} x{self.slots}" + (f" cpus={cpu_list(self.cpus)}" if self.cpus else "")

    def process_env(self) -> dict[str, str]:
        """The server's environment additions: the spec's env, and its GPUs as CUDA_VISIBLE_DEVICES."""
        env = dict(self.env)
        if self.gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in self.gpus)
        return env

    def describe(self) -> dict[str, Any]:
        """The spec as JSON-ready data for reports (env values are never included)."""
        data: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if name == "env":
                value = sorted(k for k, _ in value)
            elif isinstance(value, tuple):
                value = list(value)
            data[name] = value
        return data


@dataclass(frozen=True)
class ServerChoice:
    """Servers by hardware profile: the seed's model router, so one suite runs unchanged on a laptop and a GPU runner.

    Patterns are shell globs over the profile name (`rtx3090`, `h100x2`, `cpu-*`),
    tried in the order written: the first that matches wins, as a router's rules
    would, so a specific pattern goes before a broad one.
    """

    choices: tuple[tuple[str, ServerSpec], ...]

    def __post_init__(self) -> None:
        if not self.choices:
            raise SpecError("Server.pick needs at least one hardware pattern -> server spec")
        for pattern, spec in self.choices:
            if not isinstance(pattern, str) or not pattern:
                raise SpecError(f"Server.pick: a hardware pattern must be a non-empty str, got {pattern!r}")
            if not isinstance(spec, ServerSpec):
                raise SpecError(f"Server.pick: {pattern!r} must map to a server spec such as Server.llamacpp(...), got {spec!r}")

    def for_hardware(self, profile: str) -> ServerSpec:
        """The server of the first pattern `profile` matches; NoServerForHardware when none does."""
        for pattern, spec in self.choices:
            if fnmatchcase(profile, pattern):
                return spec
        patterns = ", ".join(repr(p) for p, _ in self.choices)
        raise NoServerForHardware(f"Server.pick has no server for hardware profile {profile!r} (patterns: {patterns})")


class NoServerForHardware(SpecError):
    """A Server.pick with no pattern for this machine: its items skip (fail under --swarm-require-engines).

    Raised by the marker with the rest of its config resolved (`config`), so a sweep
    still shows as its c1, c2, ... items, each skipping with the reason.
    """

    def __init__(self, message: str, config: MarkerConfig | None = None) -> None:
        super().__init__(message)
        self.config = config


def pick(choices: dict[str, ServerSpec]) -> ServerChoice:
    """`Server.pick({"rtx3090": MOE_TP1, "cpu-*": EMBEDDED})`: the marker's server follows the hardware profile."""
    if not isinstance(choices, dict):
        raise SpecError(f"Server.pick takes a dict of hardware pattern -> server spec, got {choices!r}")
    return ServerChoice(tuple(choices.items()))


@dataclass(frozen=True)
class Pause:
    """An agent's think time between an answer and its next turn: a constant, or a seeded draw.

    `kind` is "constant" (a seconds), "exp" (exponential of mean a) or "uniform"
    (between a and b).
    """

    kind: str = "constant"
    a: float = 0.0
    b: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in ("constant", "exp", "uniform"):
            raise SpecError(f"think_time kind must be 'constant', 'exp' or 'uniform', got {self.kind!r}")
        if not (self.a >= 0 and self.b >= 0 and (self.kind != "uniform" or self.b >= self.a)):
            raise SpecError(f"think_time needs seconds >= 0 (and low <= high for uniform), got {self.a!r}, {self.b!r}")


CACHE_MODES = ("cold", "warm")


@dataclass(frozen=True)
class Workload:
    """What one agent sends: which prompts, how many sessions of how many turns, and how long the answers are.

    `max_tokens=None` means natural completion; with `pinned=True` every answer is
    forced to exactly `max_tokens` (ignore_eos) so throughput compares cleanly.
    `prompts_per_agent` counts sessions; a session of `turns` turns sends the
    conversation so far at each turn, answers included, after `think_time`. With
    `cache="cold"` every request starts with a nonce of its own, so nothing of it
    can come from a prefix cache; with `cache="warm"` the shared `system_prompt`
    comes first and each turn extends the last, so a server can reuse both.
    """

    prompts: str | tuple[str, ...] = "coding"
    prompts_per_agent: int = 1
    max_tokens: int | None = 128
    pinned: bool = True
    temperature: float = 0.2
    top_p: float = 0.9
    seed: int | None = None
    api: str = "completions"
    turns: int = 1
    system_prompt: str | None = None
    think_time: Pause = Pause()
    followups: str = "agent"
    cache: str = "cold"

    def __post_init__(self) -> None:
        positive_int("prompts_per_agent", self.prompts_per_agent)
        positive_int("turns", self.turns)
        if self.cache not in CACHE_MODES:
            raise SpecError(f"cache must be 'cold' or 'warm', got {self.cache!r}")
        if self.cache == "warm" and self.turns == 1 and not self.system_prompt:
            raise SpecError("cache='warm' needs something to reuse: turns > 1 or a system_prompt")
        if self.max_tokens is not None:
            positive_int("max_tokens", self.max_tokens)
        elif self.pinned:
            raise SpecError("pinned=True needs max_tokens: the length to pin the output to")
        if self.api not in ("completions", "chat"):
            raise SpecError(f"api must be 'completions' or 'chat', got {self.api!r}")


@dataclass(frozen=True)
class TraceRequest:
    """One line of a Mooncake trace: when it came (ms), its lengths in tokens, and the prefix blocks it shares."""

    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]


@dataclass(frozen=True)
class Trace:
    """A Mooncake-format trace, read once at collection: replayed at its own times, `scale` stretching them.

    `block` is the tokens per hash id the trace was made with (Mooncake: 512).
    """

    path: str
    requests: tuple[TraceRequest, ...]
    scale: float = 1.0
    block: int = 512


ARRIVALS = ("constant", "poisson", "burst", "ramp")


@dataclass(frozen=True)
class OpenLoop:
    """Arrivals that do not wait for each other: a rate and a process, or a trace's own times.

    Each arrival starts a session (one request with turns=1) on schedule whether or
    not the earlier ones finished; `max_in_flight` caps the sessions in flight (later
    ones wait, and the wait is not counted against the generator). A round whose
    sends left their schedule by more than `max_lateness_s` at p99, or whose
    achieved rate is more than 5% off the schedule's, fails: the load generator was
    the limit, not the server.
    """

    rate: float | None = None
    arrival: str = "constant"
    ramp: tuple[float, float] | None = None
    burst_shape: float | None = None
    duration_s: float | None = None
    requests: int | None = None
    max_in_flight: int | None = None
    seed: int = 0
    max_lateness_s: float = 0.01
    trace: Trace | None = None

    def __post_init__(self) -> None:
        if self.trace is None and self.arrival not in ARRIVALS:
            raise SpecError(f"arrival must be one of {', '.join(ARRIVALS)}, got {self.arrival!r}")
        if self.trace is None and self.arrival != "ramp" and not (self.rate is not None and self.rate > 0):
            raise SpecError(f"rate must be > 0 requests per second, got {self.rate!r}")
        if self.trace is None and self.duration_s is None and self.requests is None:
            raise SpecError("an open-loop round needs duration= (seconds) or requests= (a count)")
        optional_positive("requests", self.requests)
        optional_positive("max_in_flight", self.max_in_flight)

    @property
    def label(self) -> str:
        """How the table names the load: the rate and process, or the trace."""
        if self.trace is not None:
            return f"trace x{self.trace.scale:g}"
        if self.arrival == "ramp" and self.ramp is not None:
            return f"ramp {self.ramp[0]:g}-{self.ramp[1]:g}/s"
        return f"{self.rate:g}/s {self.arrival}"


@dataclass(frozen=True)
class Load:
    """How the workload is applied: agents at once, warm-up, measured rounds, bounds.

    `generators` is the number of load-generator processes the agents are spread
    over (load/generator_pool.py); it never exceeds the agents, since a generator
    without an agent would only cost a process start.
    """

    concurrency: int = 1
    rounds: int = 3
    warmup: bool = True
    request_timeout_s: float = 120.0
    workers: int = 1
    generators: int = 1
    open_loop: OpenLoop | None = None

    @property
    def agents(self) -> int:
        """Agents in a round: `concurrency` per server, on each of `workers` servers."""
        return self.concurrency * self.workers

    def __post_init__(self) -> None:
        positive_int("concurrency", self.concurrency)
        positive_int("workers", self.workers)
        positive_int("rounds", self.rounds)
        positive_int("generators", self.generators)
        if not self.request_timeout_s > 0:
            raise SpecError(f"timeout must be > 0 seconds, got {self.request_timeout_s!r}")
        if self.open_loop is None:  # an open-loop round has as many arrivals as its schedule, not `agents`
            object.__setattr__(self, "generators", min(self.generators, self.agents))


DEFAULT_INTERACTIVE = (("ttft.p95", Limit("<", 2.0)), ("per_request_tps.median", Limit(">", 20.0)))
"""Interactive, as the swarm write-ups define it: p95 TTFT under 2 s and median decode over 20 tok/s."""


@dataclass(frozen=True)
class MarkerConfig:
    """A validated, resolved marker: the server, the levels swept, and the per-level load.

    In request mode the levels are concurrencies (items c1, c2, ...) against one
    server; in process mode they are worker counts (items w1, w2, ...): that many
    servers of the spec, each with `concurrency` agents of its own. Everything the
    command line can change (the endpoint, generators, boots) is already resolved
    here, once, at collection; `prompt_base` holds the prompts the workload names,
    read once, so a missing prompt file fails collection, not a booted server.

    With `open_loop` the item sends on a schedule instead: its levels are request rates (items
    r1, r2, ...), or one item for a ramp or a trace. `goodput`: the per-request SLOs it counts.

    With a `reference` the item is an A/B comparison measured in pairs until its claims are decided
    or its budget (`max_pairs`; `max_seconds` of wall-clock, boots included) is spent: `gate` figures
    are tested against the reference with the tolerance, `expect` holds expected ratios candidate /
    reference. `pairing`: a round a side with both servers up (rebooted every `reboot_every` pairs; None: as measured),
    or a boot a side. A stored-baseline item with a `canary` (canary.py) is measured beside it the
    same way; `fixed` (boots= or rounds= given) makes that many boots of that many pairs.
    """

    server: ServerSpec
    levels: tuple[float, ...]
    parametrized: bool
    workload: Workload
    prompt_base: tuple[str, ...]
    rounds: int
    warmup: bool
    timeout_s: float
    boots: int = 1
    gate: tuple[str, ...] = DEFAULT_GATE
    tolerance: float = DEFAULT_TOLERANCE
    slo: tuple[tuple[str, Limit], ...] = ()
    """Hard limits on the candidate's figures, those on failures aside (they are `failures`)."""
    failures: tuple[tuple[str, Limit], ...] = NO_FAILURES
    """The limits on failures and failure_share each side of the item must hold: allow_failures= and slo='s, else none allowed."""
    mode: str = "request"
    concurrency: int = 1
    interactive: tuple[tuple[str, Limit], ...] = DEFAULT_INTERACTIVE
    generators: int = 1
    reference: ServerSpec | None = None
    expect: tuple[tuple[str, Limit], ...] = ()
    open_loop: OpenLoop | None = None
    goodput: tuple[tuple[str, Limit], ...] = ()
    ray_resources: tuple[tuple[str, float], ...] = ()
    """What each Ray actor of the item asks for beyond its GPUs (with --swarm-ray): custom resources, and CPU (default 1)."""
    pairing: str = "rounds"
    min_pairs: int = 0
    max_pairs: int = 60
    max_seconds: float = 600.0
    reboot_every: int | None = None
    canary: ServerSpec | None = None
    fixed: bool = False

    @property
    def level_prefix(self) -> str:
        return "w" if self.mode == "process" else "r" if self.open_loop is not None else "c"

    def level_id(self, level: float) -> str:
        """The item's id in a sweep: c4, w2, r0.5."""
        return f"{self.level_prefix}{level:g}"

    def load(self, level: float) -> Load:
        """The load of one item: `level` agents on one server, `level` workers of `concurrency` agents, or `level` requests a second."""
        if self.mode == "process":
            return Load(self.concurrency, self.rounds, self.warmup, self.timeout_s, workers=int(level), generators=self.generators)
        if self.open_loop is not None:
            rated = self.open_loop if self.open_loop.rate is None else replace(self.open_loop, rate=float(level))
            return Load(1, self.rounds, self.warmup, self.timeout_s, generators=self.generators, open_loop=rated)
        return Load(int(level), self.rounds, self.warmup, self.timeout_s, generators=self.generators)


@dataclass(frozen=True)
class PlannedItem:
    """One collected item's experiment, derived once at collection: its config, level and load.

    `test_key` names the sweep the item belongs to (the test, less its level), so
    contention and speedup find the C=1 item of the same sweep.
    """

    nodeid: str
    test_key: str
    config: MarkerConfig
    level: float
    load: Load
