"""The bisect kind (`bisect=`): each step an A/B of one server against the first, chosen by its search: the servers
in order (gate/bisection.py), or, for two servers that differ in several changes, those changes (gate/flag_search.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from ..core.errors import BootError, BuildError, ReleaseNotFound
from ..core.records import ServerInfo
from ..figures.summary import ItemFigures, RoundFigures, summarize
from ..gate.bisection import Bisection, BisectStep, Finding, Probe, finding_of, most_steps
from ..gate.flag_search import FlagProbe, FlagSearch, FlagStep
from ..gate.statistics import Verdict
from ..gate.verdict import GateOutcome, claims_verdict, decided, evaluate_ab, paired_comparisons
from ..report.bisect_text import probe_words, step_words
from ..results.item import Bisected, BisectStepResult, ItemResult, Kind, Paired, ReferenceSide
from ..specs import Bisect, PlannedItem, ServerSpec
from ..specs.changes import Difference, differences, with_changes
from .context import Context, Lines, judge_against_reference
from .round_pairs import Level, Played
from .sides import Side


@dataclass
class BisectRule:
    """A step is settled when its A/B's claims are, read both ways where a change either way is looked for."""

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
    """One step as played: what it probed, its two sides (the probe's, the first's), how its search ended, its
    cost."""

    probe: Probe | FlagProbe
    spec: ServerSpec
    sides: list[Side]
    played: Played
    seconds: float


@dataclass
class BisectItem:
    """A bisect: the first of its servers whose claims differ from the first's, or of two servers' changes the
    smallest set that carries the difference. A retried step gets twice the item's budget."""

    item: PlannedItem
    context: Context
    wanted: Bisect
    sides: list[Side] = field(init=False)
    """Before the search, a side a server (what set-up prepares); after it, the ends' A/B: the last, the first."""
    changes: tuple[Difference, ...] = field(init=False)
    """Two servers' changes, where the search is over them; empty for a search over the servers."""
    search: Bisection | FlagSearch = field(init=False)
    played: list[BisectStepPlayed] = field(default_factory=list)
    results: list[BisectStepResult] = field(default_factory=list)
    unbuilt: dict[ServerSpec, str] = field(default_factory=dict)
    """The servers between the ends whose release set-up could not install, and pip's words."""

    def __post_init__(self) -> None:
        config, servers = self.item.config, self.wanted.servers
        self.sides = [Side(spec, config.workload, self.item.load) for spec in servers]
        self.changes = differences(servers[0], servers[1]) if len(servers) == 2 else ()
        self.search = FlagSearch(len(self.changes)) if len(self.changes) >= 2 else Bisection(len(servers))

    def play(self, lines: Lines, say: Callable[[str], None] | None) -> Played:
        name, servers = self.item.nodeid.rsplit("::", 1)[-1], self.wanted.servers
        if say is not None:
            say(f"  {name}: {self._plan()}")
        while (probe := self.search.next_probe()) is not None:
            step = self._step(probe, lines, say)
            figures = step_figures(step)
            self.search = self._record(probe, self._finding(step, figures))
            self.results.append(self._result(step, figures))
            if say is not None:
                say(f"  {name}: {'flag search' if self.changes else 'bisect'} {step_words(self.results[-1])}")
            if step.played.crash is not None and step.played.side == 1:
                break  # the first server itself died: nothing after this compares with anything
        ends = next(s for s in reversed(self.played) if self._ends(s.probe))
        if ends.sides[0].rounds:
            self.sides = ends.sides
            return ends.played
        # The changed end never served: the item shows the first's figures from a step where it played, and fails.
        first = next((s.sides[1] for s in reversed(self.played) if s.sides[1].rounds), None)
        if first is None:
            raise BootError(f"{probe_words(servers, self.changes, ends.probe)}: {ends.played.crash}")
        self.sides = [first]
        return Played()

    def alike_as(self, specs: Sequence[ServerSpec]) -> None:
        """The servers as set-up matched them (engines/registry.py's `alike`), in the same order."""
        self.wanted = replace(self.wanted, servers=tuple(specs))
        config = self.item.config
        self.sides = [Side(spec, config.workload, self.item.load) for spec in specs]

    def defer(self, spec: ServerSpec, error: BuildError) -> bool:
        """Whether a release that set-up could not install waits for its step, as a server that fails to boot does:
        one between the ends, that the index holds. The ends must install, and a release the index does not hold is
        a name to correct: those stop the run at set-up."""
        servers = self.wanted.servers
        if isinstance(error, ReleaseNotFound) or spec in (servers[0], servers[-1]):
            return False
        self.unbuilt[spec] = str(error)
        return True

    def _plan(self) -> str:
        """What the search will do and what it may cost, said before it starts."""
        servers, budget = self.wanted.servers, self.item.config.budget
        each = f"of at most {budget.max_seconds:g} s each, one undecided step measured again at twice that"
        if self.changes:
            return (
                f"flag search over the {len(self.changes)} changes from {servers[0].label} to the second server: "
                f"every change at once first, then parts of the set that carries it, steps {each}"
            )
        return (
            f"bisect of {len(servers)} servers against the first, {servers[0].label}: at most "
            f"{most_steps(len(servers))} steps when every step decides, {each}"
        )

    def _ends(self, probe: Probe | FlagProbe) -> bool:
        """Whether the step measures the ends: the last server, or every change at once."""
        if isinstance(probe, Probe):
            return probe.probe == len(self.wanted.servers) - 1
        return len(probe.applied) == len(self.changes)

    def _record(self, probe: Probe | FlagProbe, finding: Finding) -> Bisection | FlagSearch:
        match self.search, probe:
            case Bisection() as search, Probe():
                return search.record(probe, finding)
            case FlagSearch() as search, FlagProbe():
                return search.record(probe, finding)
        raise TypeError(f"a {type(probe).__name__} for a {type(self.search).__name__}")

    def _spec(self, probe: Probe | FlagProbe) -> ServerSpec:
        """The server a step measures against the first."""
        servers = self.wanted.servers
        if isinstance(probe, Probe):
            return servers[probe.probe]
        if len(probe.applied) == len(self.changes):
            return servers[1]
        return with_changes(servers[0], servers[1], [self.changes[i].name for i in probe.applied])

    def _step(self, probe: Probe | FlagProbe, lines: Lines, say: Callable[[str], None] | None) -> BisectStepPlayed:
        """The probe's A/B against the first server, paired until decided within the step's budget. A probe that
        failed to install or fails to boot is the step's result; a first server that fails to boot fails the item."""
        config, load = self.item.config, self.item.load
        budget = config.budget
        if probe.retry:
            budget = replace(budget, max_pairs=2 * budget.max_pairs, max_seconds=2 * budget.max_seconds)
        item = replace(self.item, config=replace(config, budget=budget))
        first, spec = self.wanted.servers[0], self._spec(probe)
        sides = [
            Side(spec, config.workload, load, probe_words(self.wanted.servers, self.changes, probe)),
            Side(first, config.workload, load, "#0"),
        ]
        side_lines = lines(item, sides)
        rule = BisectRule(item, self.context.gate.alpha, either=self.wanted.direction == "either")
        search, started = self.context.search, time.monotonic()
        try:
            if spec in self.unbuilt:
                raise BuildError(f"failed to install: {self.unbuilt[spec]}")
            (played,) = search.play_levels([Level(item, sides, lambda s: side_lines(s, None), rule)], say)
        except BuildError as exc:
            played = Played(str(exc), 0)
        except BootError as exc:
            if not (sides[1].info or any(step.sides[1].info for step in self.played)):
                search.reference_pool.get(first)  # which failed: the first's own BootError fails the item here
            played = Played(f"failed to boot: {exc}", 0)
        step = BisectStepPlayed(probe, spec, sides, played, time.monotonic() - started)
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
        named = probe_words(self.wanted.servers, self.changes, step.probe)
        if probe is None:
            outcome = GateOutcome(Verdict.FAIL, (), (f"{named}: {step.played.crash}",), (), "reference")
        else:
            outcome = evaluate_ab(probe, first, self.item.config.criteria, self.context.gate, step.played.undecided)
        searched: BisectStep | FlagStep = self.search.steps[-1]
        return BisectStepResult(
            searched,
            outcome,
            named,
            step.sides[0].info,
            pairs=min(len(s.rounds) for s in step.sides),
            seconds=step.seconds,
            undecided=step.played.undecided,
            crash=step.played.crash,
            first_died=step.played.crash is not None and step.played.side == 1,
            ends=self._ends(step.probe),
        )

    def payload(self, results: Sequence[ItemFigures], played: Played) -> Kind:
        other = ReferenceSide(self.sides[1].spec, self.sides[1].info, results[1]) if len(results) > 1 else None
        infos: list[ServerInfo | None] = [None] * len(self.wanted.servers)
        for step in self.played:
            if step.spec in self.wanted.servers:
                infos[self.wanted.servers.index(step.spec)] = step.sides[0].info or None
            infos[0] = step.sides[1].info or infos[0]
        ends = Paired(other, canary=False, undecided=played.undecided, pairing=played.pairing)
        servers, direction = self.wanted.servers, self.wanted.direction
        return Bisected(servers, direction, self.search, tuple(self.results), ends, tuple(infos), self.changes)

    def judge(self, measured: ItemResult, without_c1: str) -> GateOutcome:
        """The ends' A/B: the last server (every change) against the first; failed where it never served."""
        ends = next(s for s in reversed(self.results) if s.ends)
        if ends.pairs == 0:  # it never served: the item's figures are the first's
            return GateOutcome(Verdict.FAIL, (), (f"{ends.probed}: {ends.crash}",), (), "reference")
        return judge_against_reference(measured, self.context.gate, without_c1)


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
