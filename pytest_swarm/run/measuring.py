"""The run's measuring state: the server pools, each item's kind, every item's result. The result travels from
`measure` to `conclude` on the item itself."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.errors import BuildError, EngineMissing
from ..core.records import RoundRecord
from ..figures.checks import contradictions
from ..figures.summary import ItemFigures, round_figures, summarize
from ..figures.workers import nodes_over_boots
from ..results.item import ItemResult
from ..results.sweeps import SweepFigures, sweeps_of
from ..settings import PluginSettings
from ..specs import PlannedItem, ServerSpec, in_units
from ..telemetry.hardware import HardwareProfile
from ..telemetry.memory import peak_memory
from .bisect_kind import BisectItem
from .closing import Closing
from .context import Context, ItemKind, Lines, SideLines
from .judge import Judge
from .kinds import ABItem, choose, sharing_boots
from .machine import THIS_MACHINE, Machine
from .round_pairs import Played
from .search import Search
from .sides import Side

if TYPE_CHECKING:
    from ..load.ray.backend import RayBackend

AddFigures = Callable[[ItemFigures, Sequence[RoundRecord]], dict[str, float]]
"""Figures of one's own from an item's figures and rounds: the pytest_swarm_figures hook, as the fixture calls it."""


def connections_words(round_: RoundRecord) -> str:
    """The round's connections for its progress line ("" where not counted); one per request: the server closes each."""
    opened = round_.connections_opened
    if opened is None:
        return ""
    resent = round_.connection_retries or 0
    again = f" ({resent} request{'s' if resent != 1 else ''} resent)" if resent else ""
    return f"{opened} connection{'s' if opened != 1 else ''} opened{again}, "


class MeasuringSession:
    """The run's measuring state, one per session with swarm items; it stops every server it started."""

    def __init__(
        self,
        settings: PluginSettings,
        hardware: HardwareProfile,
        rootdir: Path,
        selected: Sequence[PlannedItem],
        machine: Machine = THIS_MACHINE,
    ) -> None:
        """`machine` is this one in a run; a fake box (pytest_swarm.testing) where a plugin's pytest_swarm_machine
        hook returns one."""
        self.settings = settings
        self.hardware = hardware
        self.machine = machine
        self.judge = Judge(settings, hardware, rootdir)  # a broken baselines file stops the run before anything boots
        self.closing = Closing(settings, hardware, rootdir)  # so does a results store that cannot be reached or written
        self.pool, self.reference_pool = machine.pools(settings)
        """An A/B item's reference, up beside the candidate's servers while the item pairs rounds; stopped when it
        ends."""
        self.items: list[ItemResult] = []
        """Every measured item, in the order measured; concluded, each is replaced by its judged form."""
        self.sweeps = sweeps_of(selected)
        """The selected items by sweep (marker): what contention and speedup are read against, and the figures across
        levels."""
        self.ray: RayBackend | None = None
        search = Search(settings, self.pool, self.reference_pool, self._ray, machine.players(), machine.devices)
        self.context = Context(search, self.judge, settings.gate)
        self.matched: dict[tuple[ServerSpec, ...], tuple[list[ServerSpec], str | None]] = {}
        """Each set of servers an item compares, as their engine boots them alike, and the line that said so."""
        self.kinds: dict[str, ItemKind] = {}
        """Each item's kind, chosen once: at its own measuring, or with the first level of a group that shares boots."""

    def prepare(self, items: Sequence[PlannedItem], say: Callable[[str], None]) -> None:
        """Before anything boots: each release a spec of these items names, installed once. A SpecError or BuildError
        stops the run there, naming the spec, unless a bisect takes the failed install as its step's result."""
        done: dict[ServerSpec, BuildError | None] = {}
        for item in items:
            kind = self.kind(item)
            for side in kind.sides:
                if side.spec not in done:
                    done[side.spec] = self._prepared(side.spec, say)
                failed = done[side.spec]
                if failed is not None and not (isinstance(kind, BisectItem) and kind.defer(side.spec, failed)):
                    raise failed
            if all(done[side.spec] is None for side in kind.sides):
                self._alike(kind, say)

    def _alike(self, kind: ItemKind, say: Callable[[str], None]) -> None:
        """The servers an A/B or a bisect compares, booted alike where their engine would add a flag only some of
        them have (engines/registry.py's `alike`), said once for each set of servers."""
        if not isinstance(kind, BisectItem) and [side.role for side in kind.sides] != ["candidate", "reference"]:
            return
        given = tuple(side.spec for side in kind.sides)
        if given not in self.matched:
            self.matched[given] = self.machine.alike(given, self.settings)
            if self.matched[given][1] is not None:
                say(f"swarm: {kind.item.nodeid}: {self.matched[given][1]}")
        specs = self.matched[given][0]
        if isinstance(kind, BisectItem):
            kind.alike_as(specs)
        else:
            for side, spec in zip(kind.sides, specs, strict=True):
                side.spec = spec

    def _prepared(self, spec: ServerSpec, say: Callable[[str], None]) -> BuildError | None:
        """The spec's release made, or why it could not be."""
        try:
            self.machine.prepare(spec, say)
        except BuildError as exc:
            return exc
        return None

    def missing_engine(self, item: PlannedItem) -> str | None:
        """What to install when an engine the item would boot cannot start here; None when all can."""
        for side in self.kind(item).sides:
            try:
                self.machine.check_installed(side.spec, self.settings)
            except EngineMissing as exc:
                canary = side.role == "canary"
                off = " (or canary=False, or --swarm-canary=off: absolute figures, no canary)" if canary else ""
                return f"{'canary: ' if canary else ''}{exc}{off}"
        return None

    def kind(self, item: PlannedItem) -> ItemKind:
        """The item's kind, chosen at its first call; an A/B item's sweep-mates that share its boots get theirs with
        it."""
        known = self.kinds.get(item.nodeid)
        if known is not None:
            return known
        kind = choose(item, self.context)
        if isinstance(kind, ABItem):
            measured = {result.nodeid for result in self.items} | set(self.kinds)
            others = [other for other in self.sweeps[item.test_key].selected.values() if other.nodeid not in measured]
            for level in sharing_boots(item, others, self.context):
                self.kinds[level.item.nodeid] = level
        return self.kinds.setdefault(item.nodeid, kind)

    def measure(
        self, item: PlannedItem, say: Callable[[str], None] | None = None, add_figures: AddFigures | None = None
    ) -> ItemResult:
        """Play the item's kind. Stops early at a guard abort or a dead server, keeping what was measured;
        interrupted, it records what it has, marked incomplete."""
        kind = self.kind(item)
        try:
            played = kind.play(self._lines(say), say)
        except KeyboardInterrupt:
            if kind.sides[0].rounds:
                self._record(kind, Played("interrupted: partial results"), incomplete=True)
            raise
        finally:
            self.reference_pool.stop()
        return self._record(kind, played, add_figures=add_figures)

    def _lines(self, say: Callable[[str], None] | None) -> Lines:
        """The progress lines of an item's sides, said to `say`."""

        def for_item(item: PlannedItem, sides: list[Side]) -> SideLines:
            return partial(self._progress, item, sides, say=say)

        return for_item

    def _progress(
        self, item: PlannedItem, sides: list[Side], side: Side, level: float | None, say: Callable[[str], None] | None
    ) -> Callable[[RoundRecord], None]:
        """The line said after each round of a side of the item (under -v): its pair and boot, or the capacity search's
        level, or its boot and round."""
        config, load = item.config, item.load
        searched = config.capacity

        def line(round_: RoundRecord) -> None:
            if say is None:
                return
            figures = round_figures(round_)
            played = sum(1 for r in side.rounds if r.boot == round_.boot)
            who = f" {side.role}" if side.role else ""
            where = (
                f"pair {round_.pair + 1} (boot {round_.boot + 1})"
                if round_.pair is not None
                else f"capacity search at {in_units(searched.what, level)}"
                if searched is not None and level is not None
                else f"boot {round_.boot + 1}{f'/{config.boots}' if len(sides) == 1 else ''} "
                f"round {played}/{load.rounds}"
            )
            say(
                f"  {item.nodeid.rsplit('::', 1)[-1]}:{who} {where}: "
                f"{figures.requests - figures.failures}/{figures.requests} requests ok, "
                f"{connections_words(round_)}"
                f"{figures.effective_tps:.1f} tok/s, "
                f"wall {figures.wall_s:.2f} s" + (f" ({round_.aborted})" if round_.aborted else "")
            )

        return line

    def _ray(self) -> RayBackend | None:
        """The Ray cluster of --swarm-ray, joined at its first item; None without the option (Ray is then never
        imported)."""
        if self.settings.ray is None:
            return None
        if self.ray is None:
            from ..load.ray.cluster import prepare  # here: only a run with --swarm-ray imports Ray, and only after this

            prepare(self.settings.ray)  # a loopback cluster is held to loopback before Ray's import
            from ..load.ray.backend import RayBackend

            self.ray = RayBackend(self.settings.ray, self.settings.launch, self.settings.locks)
        return self.ray

    def _record(
        self, kind: ItemKind, played: Played, incomplete: bool = False, add_figures: AddFigures | None = None
    ) -> ItemResult:
        """The item's result; a crash is charged to its side, an interrupt to both. A side that never played has no
        figures."""
        item, sides = kind.item, kind.sides
        config = item.config
        played_sides = [side for side in sides if side.rounds]
        results = [
            summarize(
                side.rounds,
                side.workload.pinned_tokens,
                side.load.workers,
                reference=None if side.role == "canary" else self.sweeps[item.test_key].single_agent(side.spec),
                memory=peak_memory(side.memory),
                problem=played.crash if played.side is None or side is sides[played.side] else None,
                interactive=config.criteria.interactive,
                goodput=config.criteria.goodput,
                price_per_hour=self.judge.price_per_hour,
            )
            for side in played_sides
        ]
        results = [
            replace(result, facets=replace(result.facets, nodes=nodes_over_boots(side.nodes)))
            for result, side in zip(results, played_sides, strict=True)
        ]
        if add_figures is not None and results:
            added = add_figures(results[0], sides[0].rounds)
            results[0] = replace(results[0], facets=replace(results[0].facets, added=added))
        contradiction = None
        if not incomplete:
            found = [
                (f"{side.spec.label if side.role != 'canary' else 'canary'}: " if len(sides) > 1 else "") + why
                for side, result in zip(played_sides, results, strict=True)
                for why in contradictions(side.spec, side.info, side.workload, side.load, result)
            ]
            contradiction = "; ".join(found) or None
        measured = ItemResult(
            item,
            sides[0].spec,
            sides[0].info,
            results[0],
            kind.payload(results, played),
            incomplete=incomplete,
            problem=contradiction,
            answer_lengths=fit.counted_by if (fit := sides[0].fit) is not None and fit.answer_tokens else None,
        )
        self.items.append(measured)
        self.sweeps[item.test_key].add(measured)
        return measured

    def conclude(self, measured: ItemResult) -> ItemResult:
        """Gate the item's measurement by its kind; the judged result replaces the measured one in the run and its
        sweep."""
        sweep = self.sweeps[measured.test_key]
        outcome = self.kinds[measured.nodeid].judge(measured, sweep.without_single_agent(measured.item))
        concluded = replace(measured, outcome=outcome)
        self.items = [concluded if known is measured else known for known in self.items]
        sweep.add(concluded)
        return concluded

    def ended(self, nodeid: str) -> None:
        """An item ended, measured or not: its sweep computes its figures once its last item has."""
        for sweep in self.sweeps.values():
            if nodeid in sweep.selected:
                sweep.end(nodeid)

    def sweep_figures(self) -> list[SweepFigures]:
        return [sweep.figures() for sweep in self.sweeps.values()]

    def summary(self, verbose: bool) -> list[tuple[str, bool]]:
        """The terminal's swarm section, each line with whether it is a warning."""
        return self.closing.summary(self.items, self.sweep_figures(), self.judge.written, verbose)

    def write_reports(self, complete: bool) -> None:
        """Append the run to the results store, then write the reports with its trends."""
        self.closing.write(self.items, self.sweep_figures(), complete)

    def close(self) -> None:
        try:
            self.pool.stop()
            self.reference_pool.stop()
        finally:
            if self.ray is not None:
                self.ray.stop()
