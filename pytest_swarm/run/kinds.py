"""The kinds of item, each a type chosen once: its sides, how it plays, how it is judged (docs/architecture.md, "The
kinds of item")."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from ..core.errors import BootError
from ..core.records import RoundRecord, ServerInfo
from ..figures.summary import ItemFigures, RoundFigures, summarize
from ..gate.bisection import Bisection, Finding, Probe, finding_of, most_steps
from ..gate.canary import canary_comparisons, recorded_precisely
from ..gate.capacity import required_level, stored_capacity
from ..gate.statistics import Verdict
from ..gate.verdict import (
    GateOutcome,
    claims_verdict,
    decided,
    evaluate,
    evaluate_ab,
    evaluate_canaried,
    evaluate_capacity,
    evaluate_capacity_ab,
    paired_comparisons,
)
from ..report.bisect_text import server_name, step_words
from ..results.item import (
    Bisected,
    BisectStepResult,
    Capacity,
    ItemResult,
    Kind,
    Paired,
    Plain,
    ReferenceSide,
)
from ..settings import GateSettings
from ..specs import AB, Bisect, CapacityRange, CapacitySearch, PlannedItem, Reference, ServerSpec, Stored
from ..specs.canary import CANARY_LOAD, CANARY_WORKLOAD
from .judge import Judge
from .round_pairs import Level, Played
from .search import Search
from .sides import Side

SideLines = Callable[[Side, float | None], Callable[[RoundRecord], None]]
"""The progress line said after each round of a side (at a capacity level, where the float is given)."""
Lines = Callable[[PlannedItem, list[Side]], SideLines]
"""The session's progress lines for an item's sides."""


class ItemKind(Protocol):
    """One kind of item: its sides (the item's server first), how it plays them, what it leaves, how it is judged."""

    @property
    def item(self) -> PlannedItem: ...

    @property
    def sides(self) -> list[Side]: ...

    def play(self, lines: Lines, say: Callable[[str], None] | None) -> Played:
        """Boot and measure the sides until the kind's search ends; what died, on which side, how the search ended."""
        ...

    def payload(self, results: Sequence[ItemFigures], played: Played) -> Kind:
        """The kind's part of the item's result, from each side's figures (those that played a round)."""
        ...

    def judge(self, measured: ItemResult, without_c1: str) -> GateOutcome:
        """The item's verdict. `without_c1`: why a sweep-relative limit found no C=1 item to be read against."""
        ...


@dataclass
class Context:
    """What every kind plays and judges with: the search on the session's pools, the stored baselines, the gate's
    settings."""

    search: Search
    judge: Judge
    gate: GateSettings


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
        entry = self.context.judge.entry(self.item.nodeid)
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
        other = measured.reference
        return evaluate_ab(
            measured.result,
            other.result if other else None,
            measured.config.criteria,
            self.context.gate,
            measured.undecided,
            without_c1,
        )


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
        claim = stored_capacity(self.context.judge.entry(self.item.nodeid), self.item.config.criteria.tolerance)
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


@dataclass
class BisectRule:
    """A bisect's step is settled when its A/B's claims are, read both ways where a change either way is looked for."""

    item: PlannedItem
    alpha: float
    either: bool
    recording: bool = False
    fixed: bool = False

    def settled(self, item: Sequence[RoundFigures], other: Sequence[RoundFigures]) -> bool:
        criteria = self.item.config.criteria
        worse = paired_comparisons(item, other, criteria, self.alpha)[0]
        if not decided(worse) or not self.either or claims_verdict(worse) is Verdict.FAIL:
            return decided(worse)
        return decided(paired_comparisons(other, item, criteria, self.alpha)[0])


@dataclass
class BisectStepPlayed:
    """One step as played: its probe, its two sides, how its search ended, what it cost."""

    probe: Probe
    sides: list[Side]
    played: Played
    seconds: float


@dataclass
class BisectItem:
    """A bisect (`bisect=`): the first of its servers whose claims differ from the first's, found by A/Bs of a server
    against the first (gate/bisection.py chooses each). A retried step gets twice the item's budget."""

    item: PlannedItem
    context: Context
    wanted: Bisect
    sides: list[Side] = field(init=False)
    """Before the search, a side a server (what set-up prepares); after it, the ends' A/B: the last, the first."""
    search: Bisection = field(init=False)
    played: list[BisectStepPlayed] = field(default_factory=list)
    results: list[BisectStepResult] = field(default_factory=list)

    def __post_init__(self) -> None:
        config = self.item.config
        self.sides = [Side(spec, config.workload, self.item.load) for spec in self.wanted.servers]
        self.search = Bisection(len(self.wanted.servers))

    def play(self, lines: Lines, say: Callable[[str], None] | None) -> Played:
        name, servers = self.item.nodeid.rsplit("::", 1)[-1], self.wanted.servers
        budget = self.item.config.budget
        if say is not None:
            steps = most_steps(len(servers))
            say(
                f"  {name}: bisect of {len(servers)} servers against the first, {servers[0].label}: at most "
                f"{steps} steps of at most {budget.max_seconds:g} s each when every step decides, one retried at "
                f"twice that"
            )
        while (probe := self.search.next_probe()) is not None:
            step = self._step(probe, lines, say)
            figures = step_figures(step)
            self.search = self.search.record(probe, self._finding(step, figures))
            self.results.append(self._result(step, figures))
            if say is not None:
                say(f"  {name}: bisect {step_words(self.results[-1], servers)}")
            if step.played.crash is not None and step.played.side == 1:
                break  # the first server itself died: nothing after this compares with anything
        ends = next(s for s in reversed(self.played) if s.probe.probe == len(servers) - 1)
        if ends.sides[0].rounds:
            self.sides = ends.sides
            return ends.played
        # The last server never served: the item shows the first's figures from a step where it played, and fails.
        first = next((s.sides[1] for s in reversed(self.played) if s.sides[1].rounds), None)
        if first is None:
            raise BootError(f"{server_name(servers, len(servers) - 1)}: {ends.played.crash}")
        self.sides = [first]
        return Played()

    def _step(self, probe: Probe, lines: Lines, say: Callable[[str], None] | None) -> BisectStepPlayed:
        """The probe's A/B against the first server, paired until decided within the step's budget. A probe that
        fails to boot is the step's result; a first server that fails to boot fails the item."""
        config, load = self.item.config, self.item.load
        budget = config.budget
        if probe.retry:
            budget = replace(budget, max_pairs=2 * budget.max_pairs, max_seconds=2 * budget.max_seconds)
        item = replace(self.item, config=replace(config, budget=budget))
        first = self.wanted.servers[0]
        sides = [
            Side(self.wanted.servers[probe.probe], config.workload, load, f"#{probe.probe}"),
            Side(first, config.workload, load, "#0"),
        ]
        side_lines = lines(item, sides)
        rule = BisectRule(item, self.context.gate.alpha, either=self.wanted.direction == "either")
        search, started = self.context.search, time.monotonic()
        try:
            (played,) = search.play_levels([Level(item, sides, lambda s: side_lines(s, None), rule)], say)
        except BootError as exc:
            if not (sides[1].info or any(step.sides[1].info for step in self.played)):
                search.reference_pool.get(first)  # which failed: the first's own BootError fails the item here
            played = Played(f"failed to boot: {exc}", 0)
        step = BisectStepPlayed(probe, sides, played, time.monotonic() - started)
        self.played.append(step)
        return step

    def _finding(self, step: BisectStepPlayed, figures: Sequence[ItemFigures | None]) -> Finding:
        """What the step found: a probe that died or failed to boot differs (its claims cannot hold)."""
        probe, first = figures
        if step.played.crash is not None and step.played.side == 0:
            return Finding.DIFFERS
        if probe is None or first is None:
            return Finding.UNDECIDED
        criteria, alpha = self.item.config.criteria, self.context.gate.alpha
        worse = evaluate_ab(probe, first, criteria, self.context.gate).verdict
        better = None
        if self.wanted.direction == "either":
            better = claims_verdict(paired_comparisons(first.rounds, probe.rounds, criteria, alpha)[0])
        return finding_of(worse, better)

    def _result(self, step: BisectStepPlayed, figures: Sequence[ItemFigures | None]) -> BisectStepResult:
        probe, first = figures
        if probe is None:
            crashed = f"#{step.probe.probe}: {step.played.crash}"
            outcome = GateOutcome(Verdict.FAIL, (), (crashed,), (), "reference")
        else:
            criteria = self.item.config.criteria
            outcome = evaluate_ab(probe, first, criteria, self.context.gate, step.played.undecided)
        return BisectStepResult(
            self.search.steps[-1],
            outcome,
            step.sides[0].info,
            pairs=min(len(s.rounds) for s in step.sides),
            seconds=step.seconds,
            undecided=step.played.undecided,
            crash=step.played.crash,
            crashed=None if step.played.crash is None else (0 if step.played.side == 1 else step.probe.probe),
        )

    def payload(self, results: Sequence[ItemFigures], played: Played) -> Kind:
        other = ReferenceSide(self.sides[1].spec, self.sides[1].info, results[1]) if len(results) > 1 else None
        infos: list[ServerInfo | None] = [None] * len(self.wanted.servers)
        for step in self.played:
            infos[step.probe.probe] = step.sides[0].info or None
            infos[0] = step.sides[1].info or infos[0]
        ends = Paired(other, canary=False, undecided=played.undecided, pairing=played.pairing)
        servers, direction = self.wanted.servers, self.wanted.direction
        return Bisected(servers, direction, self.search, tuple(self.results), ends, tuple(infos))

    def judge(self, measured: ItemResult, without_c1: str) -> GateOutcome:
        """The ends' A/B: the last server against the first; failed where the last never served."""
        last = len(self.wanted.servers) - 1
        ends = next(s for s in reversed(self.results) if s.step.probe == last)
        if ends.pairs == 0:  # it never served: the item's figures are the first's
            return GateOutcome(Verdict.FAIL, (), (f"#{last}: {ends.crash}",), (), "reference")
        other = measured.reference
        return evaluate_ab(
            measured.result,
            other.result if other else None,
            measured.config.criteria,
            self.context.gate,
            measured.undecided,
            without_c1,
        )


def step_figures(step: BisectStepPlayed) -> tuple[ItemFigures | None, ItemFigures | None]:
    """The probe's and the first's figures over the step's rounds (None: no round played), a crash charged to its
    side."""
    crash, side = step.played.crash, step.played.side
    probe, first = (
        summarize(s.rounds, s.workload.pinned_tokens, s.load.workers, problem=crash if side in (None, i) else None)
        if s.rounds
        else None
        for i, s in enumerate(step.sides)
    )
    return probe, first


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
    entry = context.judge.entry(item.nodeid)
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
