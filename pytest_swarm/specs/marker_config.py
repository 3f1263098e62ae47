"""A marker resolved: the experiment of one test function (MarkerConfig) and of each item it parametrizes into
(PlannedItem)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, get_args

from ..core.figure_names import DEFAULT_GATE, DEFAULT_TOLERANCE
from ..core.limits import NO_FAILURES, Limit
from .server import ServerSpec
from .workload import Conversation, Load, OpenLoop, Trace, Workload


@dataclass(frozen=True)
class Axis:
    """What a sweep's levels count: agents against one server, workers with a server each (mode='process'), or
    requests a second (an open loop)."""

    name: Literal["concurrency", "workers", "rate"]
    prefix: str
    """The level's id in a sweep: c4, w2, r0.5."""
    symbol: str
    """How charts and legends name a level: C=4 agents, N=4 workers."""
    servers: bool
    """Whether a level counts servers (a worker swarm: one server, with its own agents, per worker)."""

    def level_of(self, agents: int, workers: int) -> int:
        """Where an item sits on its sweep's axis, from its figures' agents per server and servers."""
        return workers if self.servers else agents


CONCURRENCY = Axis("concurrency", "c", "C", servers=False)
WORKERS = Axis("workers", "w", "N", servers=True)
RATE = Axis("rate", "r", "C", servers=False)
PairingAsked = Literal["rounds", "sleep", "boots"]
"""What the marker's pairing= asks: a round a side with both at hand, a round a side with the idle side asleep, or a
boot a side."""
PAIRINGS: tuple[PairingAsked, ...] = get_args(PairingAsked)
PairingMode = Literal["co-located", "sleeping", "crossover", "boots"]
"""How the two sides were paired, as run/pairing.py chose: both up at once, the idle one asleep, GPUs swapped every
boot, or a boot a side. The result and every report carry it."""

DEFAULT_INTERACTIVE = (("ttft.p95", Limit("<", 2.0)), ("per_request_tps.median", Limit(">", 20.0)))
"""Interactive, as the swarm write-ups define it: p95 TTFT under 2 s and median decode over 20 tok/s."""


CAPACITY_LEVELS = {
    "concurrency": ("agent", "agents"),
    "workers": ("worker", "workers"),
    "rate": ("request", "requests"),
}
"""What a capacity search can search over, and what its levels count (one, many)."""


def in_units(what: str, level: float) -> str:
    """A capacity level as the report says it: "1 agent", "4 workers", "2.5 requests a second"."""
    one, many = CAPACITY_LEVELS[what]
    return f"{level:g} {one if level == 1 else many}" + (" a second" if what == "rate" else "")


@dataclass(frozen=True)
class CapacityRange:
    """`capacity={what: (low, high)}`: the range a capacity search explores (gate/capacity.py)."""

    what: str
    low: float
    high: float

    @property
    def whole(self) -> bool:
        """Agents and workers are counted whole; rates are not."""
        return self.what != "rate"


@dataclass(frozen=True)
class Criteria:
    """What an item is judged by: the figures gated against the baseline or reference (`gate`, within `tolerance`),
    the hard limits (`slo`, and `failures`: allow_failures= and slo='s, else none allowed), the expected ratios
    candidate / reference (`expect`), the interactive criterion and goodput's SLOs."""

    gate: tuple[str, ...] = DEFAULT_GATE
    tolerance: float = DEFAULT_TOLERANCE
    slo: tuple[tuple[str, Limit], ...] = ()
    """Hard limits on the candidate's figures, those on failures aside (they are `failures`)."""
    failures: tuple[tuple[str, Limit], ...] = NO_FAILURES
    expect: tuple[tuple[str, Limit], ...] = ()
    interactive: tuple[tuple[str, Limit], ...] = DEFAULT_INTERACTIVE
    goodput: tuple[tuple[str, Limit], ...] = ()


@dataclass(frozen=True)
class PairBudget:
    """How an item measured in pairs (an A/B item, or a stored baseline beside its canary) plays them and when it
    stops: a round a side with both at hand, with the idle side asleep, or a boot a side (`pairing`, as run/pairing.py
    finds they can be); rebooted every `reboot_every` pairs (None: as measured); at least `min_pairs`, at most
    `max_pairs` and `max_seconds` of wall-clock, boots included. `fixed` (boots= or rounds= given to a canary item)
    makes exactly that many boots of that many pairs."""

    pairing: PairingAsked = "rounds"
    min_pairs: int = 0
    max_pairs: int = 80
    max_seconds: float = 720.0
    reboot_every: int | None = None
    fixed: bool = False


@dataclass(frozen=True)
class Reference:
    """An A/B item's reference (`reference=`): its server, and what it sends where that differs
    (reference_reasoning=; None: the same workload)."""

    server: ServerSpec
    workload: Workload | None = None


@dataclass(frozen=True)
class Stored:
    """An item judged against its stored baseline (or recording it), beside a `canary` where one runs (specs/canary.py:
    its figures then gated relative to the canary's)."""

    canary: ServerSpec | None = None


@dataclass(frozen=True)
class AB:
    """An item measured against a reference in the same run (`reference=`), in pairs until its claims are decided."""

    reference: Reference


@dataclass(frozen=True)
class CapacitySearch:
    """One item that searches `range` for the largest level at which the interactive criterion holds (`capacity=`),
    and the reference's own search beside it where one is given."""

    range: CapacityRange
    reference: Reference | None = None


BisectDirection = Literal["either", "worse"]
"""What a bisect looks for (`bisect_direction=`): a claim that differs from the first server's either way, or only
one that is worse."""


@dataclass(frozen=True)
class Bisect:
    """One item that finds the first of an ordered list of servers whose claims differ from the first's (`bisect=`):
    each step an A/B of a server against the first, paired until decided (gate/bisection.py searches)."""

    servers: tuple[ServerSpec, ...]
    direction: BisectDirection = "either"


Experiment = Stored | AB | CapacitySearch | Bisect
"""What kind of experiment a marker asks for, decided once when it is parsed (run/kinds.py plays each)."""


@dataclass(frozen=True)
class MarkerConfig:
    """A validated, resolved marker: the server, the levels swept, and the per-level load.

    Levels are concurrencies (items c1, c2, ...) in request mode, worker counts (w1, w2, ...) in process mode,
    request rates (r1, r2, ...) with `open_loop`. Everything the command line can change is resolved here at
    collection, and `prompt_base` holds the prompts read once. `experiment` says what it is: a stored baseline, an
    A/B comparison with its `criteria` and `budget`, or a capacity search."""

    server: ServerSpec
    levels: tuple[float, ...]
    parametrized: bool
    workload: Workload
    prompt_base: tuple[str, ...]
    rounds: int
    warmup: bool
    timeout_s: float
    dataset: tuple[Conversation, ...] = ()
    """The dataset `prompts` names, read once: `prompt_base` holds its first turns in order, with what each
    conversation answered, for fitting to the server."""
    boots: int = 1
    criteria: Criteria = Criteria()
    axis: Axis = CONCURRENCY
    concurrency: int = 1
    generators: int = 1
    experiment: Experiment = Stored()
    open_loop: OpenLoop | None = None
    ray_resources: tuple[tuple[str, float], ...] = ()
    """What each Ray actor of the item asks for beyond its GPUs (with --swarm-ray): custom resources, and CPU (default
    1)."""
    budget: PairBudget = PairBudget()

    @property
    def reference(self) -> Reference | None:
        """The reference an A/B item or a capacity search compares against; None otherwise."""
        match self.experiment:
            case AB(reference=reference) | CapacitySearch(reference=reference):
                return reference
        return None

    @property
    def bisect(self) -> Bisect | None:
        """The servers a bisect item searches; None for other items."""
        return self.experiment if isinstance(self.experiment, Bisect) else None

    @property
    def canary(self) -> ServerSpec | None:
        """The canary a stored-baseline item is measured beside; None otherwise."""
        return self.experiment.canary if isinstance(self.experiment, Stored) else None

    @property
    def capacity(self) -> CapacityRange | None:
        """The range a capacity item searches; None for other items."""
        return self.experiment.range if isinstance(self.experiment, CapacitySearch) else None

    @property
    def trace(self) -> Trace | None:
        """The trace the item replays (an open loop's), with its own request lengths; None otherwise."""
        match self.open_loop:
            case OpenLoop(trace=trace):
                return trace
        return None

    def level_id(self, level: float) -> str:
        """The item's id in a sweep: c4, w2, r0.5."""
        return f"{self.axis.prefix}{level:g}"

    def load(self, level: float) -> Load:
        """The load of one item: `level` agents on one server, `level` workers of `concurrency` agents, or `level`
        requests a second."""
        match self.axis.name, self.open_loop:
            case "workers", _:
                agents, workers, schedule = self.concurrency, int(level), None
            case "rate", OpenLoop(rate=None) as fixed:
                agents, workers, schedule = 1, 1, fixed
            case "rate", OpenLoop() as rated:
                agents, workers, schedule = 1, 1, replace(rated, rate=float(level))
            case _:
                agents, workers, schedule = int(level), 1, None
        return Load(
            agents,
            self.rounds,
            self.warmup,
            self.timeout_s,
            workers=workers,
            generators=self.generators,
            open_loop=schedule,
        )


@dataclass(frozen=True)
class PlannedItem:
    """One collected item's experiment, derived once at collection: its config, level and load. `test_key` names its
    sweep (the test less its level), so C=1 relative figures find their item."""

    nodeid: str
    test_key: str
    config: MarkerConfig
    level: float
    load: Load
