"""A marker resolved: the experiment of one test function (MarkerConfig) and of each item it parametrizes into
(PlannedItem)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, get_args

from ..core.figure_names import DEFAULT_GATE, DEFAULT_TOLERANCE
from ..core.limits import NO_FAILURES, Limit
from .server import ServerSpec
from .workload import Conversation, Load, OpenLoop, Workload

Mode = Literal["request", "process"]
"""Request mode: agents against one server; process mode: a server each of `workers` workers."""
MODES: tuple[Mode, ...] = get_args(Mode)
Pairing = Literal["rounds", "sleep", "boots"]
"""How an item's two sides are measured: a round a side with both at hand, as run/pairing.py finds they can be; a round
a side with the idle side asleep (on CPU: its processes stopped); or a boot a side, one up at a time."""
PAIRINGS: tuple[Pairing, ...] = get_args(Pairing)

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
    reference. `pairing`: a round a side with both at hand (rebooted every `reboot_every` pairs; None: as
    measured), as run/pairing.py finds they can be, or with the idle side asleep, or a boot a side. A stored-baseline
    item with a `canary` (specs/canary.py) is measured beside it the
    same way; `fixed` (boots= or rounds= given) makes that many boots of that many pairs.

    With `capacity` the item is one search over a range of levels (agents, workers or
    requests a second), each level measured until `interactive`'s verdict there is decided.
    """

    server: ServerSpec
    levels: tuple[float, ...]
    parametrized: bool
    workload: Workload
    prompt_base: tuple[str, ...]
    rounds: int
    warmup: bool
    timeout_s: float
    dataset: tuple[Conversation, ...] = ()
    """The dataset `prompts` names, read once (turns= or max_tokens='dataset'): `prompt_base` holds its first turns, in
    its order; what each conversation answered and where it lies, for fitting it to the server once it is up."""
    boots: int = 1
    gate: tuple[str, ...] = DEFAULT_GATE
    tolerance: float = DEFAULT_TOLERANCE
    slo: tuple[tuple[str, Limit], ...] = ()
    """Hard limits on the candidate's figures, those on failures aside (they are `failures`)."""
    failures: tuple[tuple[str, Limit], ...] = NO_FAILURES
    """The limits on failures and failure_share each side of the item must hold: allow_failures= and slo='s, else none
    allowed."""
    mode: Mode = "request"
    concurrency: int = 1
    interactive: tuple[tuple[str, Limit], ...] = DEFAULT_INTERACTIVE
    generators: int = 1
    reference: ServerSpec | None = None
    reference_workload: Workload | None = None
    """What the reference side sends where it differs from the candidate's (reference_reasoning=: thinking on against
    off on one server); None: the same workload."""
    expect: tuple[tuple[str, Limit], ...] = ()
    open_loop: OpenLoop | None = None
    goodput: tuple[tuple[str, Limit], ...] = ()
    ray_resources: tuple[tuple[str, float], ...] = ()
    """What each Ray actor of the item asks for beyond its GPUs (with --swarm-ray): custom resources, and CPU (default
    1)."""
    pairing: Pairing = "rounds"
    min_pairs: int = 0
    max_pairs: int = 80
    max_seconds: float = 720.0
    reboot_every: int | None = None
    canary: ServerSpec | None = None
    fixed: bool = False
    capacity: CapacityRange | None = None
    """A capacity item: one item that searches this range for the largest level at which `interactive` holds, instead
    of measuring the levels listed."""

    @property
    def level_prefix(self) -> str:
        return "w" if self.mode == "process" else "r" if self.open_loop is not None else "c"

    def level_id(self, level: float) -> str:
        """The item's id in a sweep: c4, w2, r0.5."""
        return f"{self.level_prefix}{level:g}"

    def load(self, level: float) -> Load:
        """The load of one item: `level` agents on one server, `level` workers of `concurrency` agents, or `level`
        requests a second."""
        if self.mode == "process":
            return Load(
                self.concurrency,
                self.rounds,
                self.warmup,
                self.timeout_s,
                workers=int(level),
                generators=self.generators,
            )
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
