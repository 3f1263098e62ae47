"""What one item measured and how it was judged: the one type every report reads.

Kept even when the test's own asserts fail afterwards, and written to the reports
when the run is interrupted (marked incomplete). What differs between the kinds of
item (a plain item, an A/B comparison, a stored baseline checked beside its canary,
a capacity search) is one payload of the kind's own type, `ItemResult.kind`, never
optional fields that every reader asks again.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.records import ServerInfo
from ..figures.summary import ItemFigures
from ..gate.bisection import Bisection, BisectStep, Finding
from ..gate.capacity import CapacityFound
from ..gate.flag_search import FlagSearch, FlagStep
from ..gate.verdict import GateOutcome
from ..specs import BisectDirection, MarkerConfig, PairingMode, PlannedItem, ServerSpec
from ..specs.changes import Difference


@dataclass(frozen=True)
class ReferenceSide:
    """The second side measured beside an item (an A/B reference, or a canary): its server, what it said of itself,
    its figures."""

    server: ServerSpec
    server_info: ServerInfo
    result: ItemFigures
    capacity: CapacityFound | None = None
    """A capacity item's reference: its own search."""


@dataclass(frozen=True)
class PairingNote:
    """How an item's two sides were paired on the runner and why (run/pairing.py): a value the reports render."""

    mode: PairingMode
    why: str
    switches: str | None = None
    """What putting the idle side to sleep and waking it cost, where it slept."""
    shared_with: tuple[str, ...] = ()
    """The levels of the sweep measured on the same boots (their ids), this one included; empty where it played
    alone."""


@dataclass(frozen=True)
class Plain:
    """An item measured alone, its boots in a row, judged against its stored baseline (or recording it)."""


@dataclass(frozen=True)
class Paired:
    """An item measured in pairs with a second side: an A/B item's reference, or a stored-baseline item's canary."""

    other: ReferenceSide | None
    """The second side's figures; None where it never played a round (the item's first boot stopped it)."""
    canary: bool
    """Whether the second side is the canary (a stored baseline checked relative to it) or the A/B reference."""
    undecided: str | None = None
    """The budget the search for a verdict spent before it decided (max_pairs, max_seconds); None when it decided."""
    pairing: PairingNote | None = None


@dataclass(frozen=True)
class Capacity:
    """A capacity item: every level tried, its verdict, the capacity found; its figures are the capacity level's. An
    A/B one carries the reference's search too."""

    found: CapacityFound
    reference: ReferenceSide | None = None


@dataclass(frozen=True)
class BisectStepResult:
    """One step of a bisect as measured: where the search stood and what the probe's A/B against the first server
    found (`step`), the gate's outcome of that A/B, the probe in words, what it said of itself, and what the step
    cost."""

    step: BisectStep | FlagStep
    outcome: GateOutcome
    probed: str
    """The server the step measured against the first, in words: "#5 version=2026.8.10229", "threads=1"."""
    probe_info: ServerInfo
    pairs: int
    seconds: float
    undecided: str | None = None
    """The budget the step's search spent before it decided; None when it decided."""
    crash: str | None = None
    """What died during the step, or failed to boot, where something did."""
    first_died: bool = False
    """Whether it was the first server that died: the search ends there."""
    ends: bool = False
    """Whether the step measured the ends: the last server, or every change at once."""


@dataclass(frozen=True)
class Bisected:
    """A bisect item (`bisect=`): its ordered servers, every step, and where the search ended. Its figures are those of
    its ends' A/B (`ends`: the last server against the first), which its verdict judges. A search over two servers'
    changes (`changes`) names the smallest set that carries the difference instead of a server."""

    servers: tuple[ServerSpec, ...]
    direction: BisectDirection
    search: Bisection | FlagSearch
    steps: tuple[BisectStepResult, ...]
    ends: Paired
    infos: tuple[ServerInfo | None, ...] = ()
    """What each server said of itself where it was booted (None: never booted), by index."""
    changes: tuple[Difference, ...] = ()

    @property
    def culprit(self) -> BisectStepResult | None:
        """The step that showed the answer differ from the first server: the first changed server's, or the
        smallest set of changes'."""
        match self.search:
            case Bisection(first_changed=int() as found):
                wanted: object = found
            case FlagSearch(minimal=tuple() as carrying):
                wanted = carrying
            case _:
                return None
        return next(
            (
                s
                for s in reversed(self.steps)
                if s.step.finding is Finding.DIFFERS
                and (s.step.probe if isinstance(s.step, BisectStep) else s.step.applied) == wanted
            ),
            None,
        )


Kind = Plain | Paired | Capacity | Bisected
"""The payload of each kind of item."""


@dataclass(frozen=True)
class ItemResult:
    """An item as measured, then as judged: the session concludes it into a copy with its `outcome`, never in place."""

    item: PlannedItem
    server: ServerSpec
    """The server really measured: the marker's, or the endpoint that --swarm-endpoint put in its place."""
    server_info: ServerInfo
    result: ItemFigures
    kind: Kind = Plain()
    outcome: GateOutcome | None = None
    incomplete: bool = False
    problem: str | None = None
    """Why the measurement contradicts the experiment asked for (slots, cache mode, schedule, token counts): the item
    fails with it."""
    answer_lengths: str | None = None
    """A `max_tokens="dataset"` item: how the answers were counted (the server's tokenizer, or estimated from words)."""

    @property
    def nodeid(self) -> str:
        return self.item.nodeid

    @property
    def test_key(self) -> str:
        return self.item.test_key

    @property
    def config(self) -> MarkerConfig:
        return self.item.config

    @property
    def reference(self) -> ReferenceSide | None:
        """The A/B reference's side (of a paired item or a capacity item), where one was measured."""
        match self.kind:
            case Paired(other=other, canary=False) | Capacity(reference=other) | Bisected(ends=Paired(other=other)):
                return other
        return None

    @property
    def canary(self) -> ReferenceSide | None:
        """The canary a stored-baseline item was measured interleaved with (specs/canary.py), where it was."""
        match self.kind:
            case Paired(other=other, canary=True):
                return other
        return None

    @property
    def capacity(self) -> CapacityFound | None:
        """A capacity item's search."""
        return self.kind.found if isinstance(self.kind, Capacity) else None

    @property
    def paired(self) -> Paired | None:
        """How a paired item's two sides were measured: an A/B item's, a canaried item's, a bisect's ends'."""
        match self.kind:
            case Paired():
                return self.kind
            case Bisected(ends=ends):
                return ends
        return None

    @property
    def bisect(self) -> Bisected | None:
        """A bisect item's steps and where its search ended."""
        return self.kind if isinstance(self.kind, Bisected) else None

    @property
    def undecided(self) -> str | None:
        """A paired item whose search for a verdict ended undecided: the budget it reached."""
        return None if self.paired is None else self.paired.undecided

    @property
    def pairing(self) -> PairingNote | None:
        return None if self.paired is None else self.paired.pairing

    def reference_item(self) -> ItemResult | None:
        """The reference side as an item of its own (no verdict), so reports show it with the same columns."""
        ref = self.reference
        if ref is None:
            return None
        return ItemResult(self.item, ref.server, ref.server_info, ref.result, incomplete=self.incomplete)
