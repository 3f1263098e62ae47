"""The kinds of item, each a type chosen once: its sides, how it plays, how it is judged (docs/architecture.md, "The
kinds of item")."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from ..figures.summary import ItemFigures, RoundFigures
from ..gate.canary import canary_comparisons, recorded_precisely
from ..gate.capacity import required_level, stored_capacity
from ..gate.notes import NotRestarted
from ..gate.verdict import (
    GateOutcome,
    decided,
    evaluate,
    evaluate_canaried,
    evaluate_capacity,
    evaluate_capacity_ab,
    paired_comparisons,
)
from ..results.item import (
    Capacity,
    ItemResult,
    Kind,
    Paired,
    Plain,
    ReferenceSide,
)
from ..specs import AB, Bisect, CapacityRange, CapacitySearch, PlannedItem, Reference, ServerSpec, Stored
from ..specs.canary import CANARY_LOAD, CANARY_WORKLOAD
from .bisect_kind import BisectItem
from .context import Context, ItemKind, Lines, judge_against_reference
from .round_pairs import Level, Played
from .sides import Side


@dataclass
class PlainItem:
    """An item measured alone: its boots in a row."""

    item: PlannedItem
    context: Context
    sides: list[Side] = field(init=False)

    def __post_init__(self) -> None:
        self.sides = [Side(self.item.config.server, self.item.config.workload, self.item.load)]

    def play(self, lines: Lines, say: Callable[[str], None] | None) -> Played:
        side_lines = lines(self.item, self.sides)
        return self.context.search.play_alone(self.item, self.sides[0], lambda side: side_lines(side, None))

    def payload(self, results: Sequence[ItemFigures], played: Played) -> Kind:
        return Plain()

    def judge(self, measured: ItemResult, without_c1: str) -> GateOutcome:
        entry = self.context.judge.stored(measured)
        asked = bool(measured.config.canary)  # a canary asked for, but the entry was recorded without one
        return evaluate(measured.result, measured.config.criteria, entry, self.context.gate, without_c1, asked)


@dataclass
class ABRule:
    """An A/B item's search is settled when its claims against the reference are (gate/verdict.py)."""

    item: PlannedItem
    alpha: float
    recording: bool = False
    fixed: bool = False

    def settled(self, item: Sequence[RoundFigures], other: Sequence[RoundFigures]) -> bool:
        return decided(paired_comparisons(item, other, self.item.config.criteria, self.alpha)[0])


@dataclass
class CanaryRule:
    """A canaried item's search settles when its claims relative to the canary do; boots= or rounds= fix its pairs
    instead."""

    item: PlannedItem
    context: Context

    @property
    def recording(self) -> bool:
        return self.context.judge.recording

    @property
    def fixed(self) -> bool:
        return self.item.config.budget.fixed

    def settled(self, item: Sequence[RoundFigures], other: Sequence[RoundFigures]) -> bool:
        config = self.item.config
        entry = self.context.judge.entry(self.item.nodeid, self.item.config.server)
        if entry is None:
            return recorded_precisely(item, other, config.criteria.gate, config.criteria.tolerance)
        return decided(
            canary_comparisons(
                item, other, config.criteria.gate, config.criteria.tolerance, entry, self.context.gate.alpha
            )[0]
        )


@dataclass
class ABItem:
    """An A/B item: the candidate and the reference (`reference=`) measured in pairs until decided."""

    item: PlannedItem
    context: Context
    sides: list[Side] = field(init=False)

    def __post_init__(self) -> None:
        self.sides = ab_sides(self.item)

    def level(self, lines: Lines) -> Level:
        side_lines = lines(self.item, self.sides)
        return Level(
            self.item, self.sides, lambda side: side_lines(side, None), ABRule(self.item, self.context.gate.alpha)
        )

    def play(self, lines: Lines, say: Callable[[str], None] | None) -> Played:
        return self.context.search.play_levels([self.level(lines)], say)[0]

    def payload(self, results: Sequence[ItemFigures], played: Played) -> Kind:
        other = ReferenceSide(self.sides[1].spec, self.sides[1].info, results[1]) if len(results) > 1 else None
        return Paired(other, canary=False, undecided=played.undecided, pairing=played.pairing)

    def judge(self, measured: ItemResult, without_c1: str) -> GateOutcome:
        outcome = judge_against_reference(measured, self.context.gate, without_c1)
        theirs = tuple(dict.fromkeys(side.spec.label for side in self.sides if side.spec.engine == "external"))
        return replace(outcome, notes=(*outcome.notes, NotRestarted(theirs))) if theirs else outcome


@dataclass
class CanariedItem:
    """A stored-baseline item measured in pairs with the canary (specs/canary.py), so a runner's drift cancels out."""

    item: PlannedItem
    context: Context
    canary: ServerSpec
    sides: list[Side] = field(init=False)

    def __post_init__(self) -> None:
        config, load = self.item.config, self.item.load
        canary_load = replace(CANARY_LOAD, request_timeout_s=load.request_timeout_s)
        self.sides = [
            Side(config.server, config.workload, load),
            Side(self.canary, CANARY_WORKLOAD, canary_load, "canary"),
        ]

    def play(self, lines: Lines, say: Callable[[str], None] | None) -> Played:
        side_lines = lines(self.item, self.sides)
        level = Level(self.item, self.sides, lambda side: side_lines(side, None), CanaryRule(self.item, self.context))
        return self.context.search.play_levels([level], say)[0]

    def payload(self, results: Sequence[ItemFigures], played: Played) -> Kind:
        other = ReferenceSide(self.sides[1].spec, self.sides[1].info, results[1]) if len(results) > 1 else None
        return Paired(other, canary=True, undecided=played.undecided, pairing=played.pairing)

    def judge(self, measured: ItemResult, without_c1: str) -> GateOutcome:
        canary = measured.canary
        entry = self.context.judge.stored(measured, canary)
        if canary is None:  # the item's first boot stopped it before the canary played: absolute figures
            return evaluate(measured.result, measured.config.criteria, entry, self.context.gate, without_c1)
        return evaluate_canaried(
            measured.result,
            canary.result,
            measured.config.criteria,
            entry,
            self.context.gate,
            measured.undecided,
            without_c1,
        )


@dataclass
class CapacityItem:
    """A capacity item (`capacity=`): one search over a range of levels, against a stored capacity."""

    item: PlannedItem
    context: Context
    wanted: CapacityRange
    sides: list[Side] = field(init=False)

    def __post_init__(self) -> None:
        self.sides = [Side(self.item.config.server, self.item.config.workload, self.item.load)]

    def required(self) -> float | None:
        """The level a stored capacity says the item still carries, within its tolerance; None where none is checked
        (no entry, or recording)."""
        claim = stored_capacity(
            self.context.judge.entry(self.item.nodeid, self.item.config.server), self.item.config.criteria.tolerance
        )
        return None if claim is None else required_level(*claim, self.wanted.whole)

    def play(self, lines: Lines, say: Callable[[str], None] | None) -> Played:
        search = self.context.search
        return search.capacity(self.item, self.wanted, self.sides, lines(self.item, self.sides), self.required())

    def payload(self, results: Sequence[ItemFigures], played: Played) -> Kind:
        return Capacity(played.found[0])

    def judge(self, measured: ItemResult, without_c1: str) -> GateOutcome:
        found = measured.capacity
        assert found is not None, "a capacity item's result carries its search"
        entry = self.context.judge.stored(measured)
        config = measured.config.criteria
        return evaluate_capacity(measured.result, config, entry, self.context.gate, found, without_c1)


@dataclass
class CapacityABItem(CapacityItem):
    """Two servers' capacity searches in one run (`capacity=` with `reference=`): the candidate's, then the
    reference's alone."""

    def __post_init__(self) -> None:
        self.sides = ab_sides(self.item)

    def required(self) -> float | None:
        return None  # compared with the reference's capacity, not a stored one

    def payload(self, results: Sequence[ItemFigures], played: Played) -> Kind:
        found = played.found
        reference = (
            ReferenceSide(self.sides[1].spec, self.sides[1].info, results[1], found[1] if len(found) > 1 else None)
            if len(results) > 1
            else None
        )
        return Capacity(found[0], reference)

    def judge(self, measured: ItemResult, without_c1: str) -> GateOutcome:
        found, reference = measured.capacity, measured.reference
        assert found is not None, "a capacity item's result carries its search"
        return evaluate_capacity_ab(
            measured.result,
            reference.result if reference is not None else None,
            measured.config.criteria,
            self.context.gate,
            found,
            reference.capacity if reference is not None else None,
        )


def ab_sides(item: PlannedItem) -> list[Side]:
    """An A/B item's candidate and reference, each with its own workload where the marker gives the reference one."""
    config, load = item.config, item.load
    reference = config.reference
    assert reference is not None, "an A/B item is chosen for a marker with reference="
    return [
        Side(config.server, config.workload, load, "candidate"),
        Side(reference.server, reference.workload or config.workload, load, "reference"),
    ]


class SharedBoots:
    """A sweep's A/B levels that boot the same servers, measured on the same boots: the first level to play plays
    them all."""

    def __init__(self, levels: Sequence[ABItem]) -> None:
        self.levels = list(levels)
        self.ended: dict[str, Played] = {}

    def play(self, first: ABItem, lines: Lines, say: Callable[[str], None] | None) -> Played:
        if first.item.nodeid in self.ended:
            return self.ended.pop(first.item.nodeid)
        ordered = [first, *(level for level in self.levels if level is not first)]
        played = first.context.search.play_levels([level.level(lines) for level in ordered], say)
        together = tuple(level.item.nodeid.rsplit("::", 1)[-1] for level in ordered)
        for level, ended in zip(ordered, played, strict=True):
            pairing = ended.pairing
            self.ended[level.item.nodeid] = replace(
                ended, pairing=replace(pairing, shared_with=together) if pairing is not None else None
            )
        return self.ended.pop(first.item.nodeid)


@dataclass
class SharedLevel(ABItem):
    """One A/B level of a `SharedBoots` group: judged on its own samples, played with the group."""

    group: SharedBoots | None = None

    def play(self, lines: Lines, say: Callable[[str], None] | None) -> Played:
        assert self.group is not None, "a shared level is made with its group"
        return self.group.play(self, lines, say)


def choose(item: PlannedItem, context: Context) -> ItemKind:
    """The item's kind, from its marker and, for a stored-baseline item, its entry and whether its canary can pair."""
    match item.config.experiment:
        case Bisect() as wanted:
            return BisectItem(item, context, wanted)
        case CapacitySearch(range=wanted, reference=Reference()):
            return CapacityABItem(item, context, wanted)
        case CapacitySearch(range=wanted):
            return CapacityItem(item, context, wanted)
        case AB():
            return ABItem(item, context)
        case Stored():
            canary = canary_of(item, context)
            return CanariedItem(item, context, canary) if canary else PlainItem(item, context)


def canary_of(item: PlannedItem, context: Context) -> ServerSpec | None:
    """The canary a stored-baseline item is interleaved with; without one the item is checked on absolute figures."""
    config, canary = item.config, item.config.canary
    if canary is None or context.search.pairing(config, config.server, canary).mode == "boots":
        return None
    entry = context.judge.entry(item.nodeid, config.server)
    return canary if context.judge.recording or (entry is not None and entry.canary is not None) else None


def sharing_boots(first: PlannedItem, others: Sequence[PlannedItem], context: Context) -> list[SharedLevel]:
    """`first` and the sweep's `others` that boot what it boots, as one `SharedBoots` group; none where fewer than
    two would share."""
    config, reference = first.config, first.config.reference
    assert reference is not None, "only A/B levels share boots"
    if context.search.pairing(config, config.server, reference.server).mode == "boots":
        return []
    mates = [
        other
        for other in others
        if other.nodeid != first.nodeid
        and other.config.server == config.server
        and other.config.reference == config.reference
        and other.load.workers == first.load.workers
        and type(choose(other, context)) is ABItem
    ]
    if not mates:
        return []
    levels = [SharedLevel(level, context) for level in (first, *mates)]
    group = SharedBoots(levels)
    for level in levels:
        level.group = group
    return levels
