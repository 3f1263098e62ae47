"""The run's measuring state: the server pools, the baselines, every item's result.

`measure` turns one collected item into an ItemResult (boots, warm-up, rounds,
figures); `conclude` judges it against its baseline. The fixture calls the first,
the runtest wrapper the second, and the item's result travels between them on the
item itself, never looked up again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.records import RoundRecord
from ..engines.pool import ServerPool, Servers
from ..engines.process import EngineMissing
from ..engines.registry import check_installed
from ..figures.checks import contradictions
from ..figures.summary import ItemFigures, round_figures, summarize
from ..figures.workers import nodes_over_boots
from ..gate.canary import with_canary
from ..gate.capacity import CapacityFound
from ..gate.entries import TestBaseline
from ..gate.trends import Trend
from ..gate.verdict import GateOutcome, baseline_entry, evaluate, evaluate_ab
from ..report.files import write_reports
from ..report.text import summary
from ..results.item import ItemResult, ReferenceSide
from ..results.sweeps import SweepFigures, sweeps_of
from ..settings import PluginSettings
from ..specs import PlannedItem, in_units
from ..specs.canary import CANARY_LOAD, CANARY_WORKLOAD
from ..stores import baselines, runlog
from ..stores.history import open_store
from ..telemetry.gpus import GpuMemory, gpu_memory
from ..telemetry.hardware import HardwareProfile
from ..telemetry.memory import peak_memory
from .paired import Level, Played
from .players import REAL_PLAYERS, Players
from .search import Search
from .sides import Side

if TYPE_CHECKING:
    from ..load.ray.backend import RayBackend

AddFigures = Callable[[ItemFigures, Sequence[RoundRecord]], dict[str, float]]
"""Figures of one's own from an item's figures and rounds: the pytest_swarm_figures hook, as the fixture calls it."""


def connections_words(round_: RoundRecord) -> str:
    """The round's connections for its progress line ("" where not counted): 0 opened is the rule with kept-alive
    connections; one per request says the server closes after each answer."""
    opened = round_.connections_opened
    if opened is None:
        return ""
    resent = round_.connection_retries or 0
    again = f" ({resent} request{'s' if resent != 1 else ''} resent)" if resent else ""
    return f"{opened} connection{'s' if opened != 1 else ''} opened{again}, "


class MeasuringSession:
    """The run's measuring state, one per pytest session that collected swarm items: items are measured and
    judged through it, and it stops every server it started."""

    def __init__(
        self,
        settings: PluginSettings,
        hardware: HardwareProfile,
        rootdir: Path,
        selected: Sequence[PlannedItem],
        players: Players = REAL_PLAYERS,
        pools: tuple[Servers, Servers] | None = None,
        devices: Callable[[], tuple[GpuMemory, ...] | str] = gpu_memory,
    ) -> None:
        """`players`, `pools` and `devices` (NVML's GPUs) are the real ones in a run; the fast tests of run/ pass fakes
        (players.py)."""
        self.settings = settings
        self.hardware = hardware
        self.rootdir = rootdir
        self.baseline_path = settings.baseline_dir / f"{hardware.name}.yaml"
        self.baselines = baselines.load(self.baseline_path)  # a broken file stops the run before anything boots
        self.price_per_hour = (
            settings.price_per_hour
            if settings.price_per_hour is not None
            else (self.baselines.price_per_hour if self.baselines else None)
        )
        """What the runner costs an hour, for cost_per_mtok: the option's, else the baseline file's."""
        self.history = open_store(settings.history)  # so does a results store that cannot be reached or written
        self.history_problem: str | None = None
        self.started_at = runlog.utc_now()
        self.pool, self.reference_pool = pools or (
            ServerPool(settings.launch, settings.locks),
            ServerPool(settings.launch, settings.locks),
        )
        """An A/B item's reference, up beside the candidate's servers while the item pairs rounds; stopped when it
        ends."""
        self.items: list[ItemResult] = []
        """Every measured item, in the order measured; concluded, each is replaced by its judged form."""
        self.sweeps = sweeps_of(selected)
        """The selected items by sweep (marker): what contention and speedup are read against, and the figures across
        levels."""
        self.ray: RayBackend | None = None
        self.search = Search(settings, self.pool, self.reference_pool, self._entry, self._ray, players, devices)
        self._banked: dict[str, tuple[list[Side], Played]] = {}
        """Levels measured on an earlier level's boots (run/paired.py), waiting for their items: sides and ending."""

    def missing_engine(self, item: PlannedItem) -> str | None:
        """What to install when an engine the item would boot cannot start here: its server's, its reference's, or
        the canary's where one will run beside it (named as the canary's); None when all can."""
        config = item.config
        canary = self.search.canary(item)
        for who, spec in (("", config.server), ("", config.reference), ("canary: ", canary)):
            if spec is None:
                continue
            try:
                check_installed(spec, self.settings.launch)
            except EngineMissing as exc:
                off = " (or canary=False, or --swarm-canary=off: absolute figures, no canary)" if who else ""
                return f"{who}{exc}{off}"
        return None

    def measure(
        self, item: PlannedItem, say: Callable[[str], None] | None = None, add_figures: AddFigures | None = None
    ) -> ItemResult:
        """On each of the config's boots (the first may reuse running servers): warm-up and rounds.

        An A/B item (`reference=`) measures candidate and reference in pairs until its
        claims are decided or its budget is spent: both up, a round a side, rebooted
        every few pairs (the reference in a pool of its own, stopped when the item
        ends); or, where both cannot be up, a boot a side, A B B A ...
        The sweep's other levels that boot the same servers are measured on the same
        boots (run/paired.py), each with its own pairs and looks; their results wait
        for their items. Stops early when a round was aborted by the guard or a server died; what was
        measured is kept. Interrupted (Ctrl-C), it records what it has, marked
        incomplete, before the interrupt goes on. `say` hears a line per measured round; `add_figures` (the
        pytest_swarm_figures hook) adds figures of its own to the item's server's, from its rounds.
        """
        banked = self._banked.pop(item.nodeid, None)
        if banked is not None:
            sides, played = banked
            return self._record(
                item, sides, played.crash, crashed=played.side, search=played.undecided, add_figures=add_figures,
                pairing=played.pairing,
            )  # fmt: skip
        config = item.config
        sides = self._sides(item)
        capacity: tuple[CapacityFound, ...] = ()
        pairing = None
        try:
            if config.capacity is not None:
                searched = self.search.capacity(item, sides, partial(self._progress, item, sides, say))
                problem, crashed, capacity, search = searched.crash, searched.side, searched.found, None
            elif len(sides) > 1:
                levels = [Level(item, sides, partial(self._progress, item, sides, say, level=None))]
                for other in self._on_the_same_boots(item):
                    other_sides = self._sides(other)
                    levels.append(
                        Level(other, other_sides, partial(self._progress, other, other_sides, say, level=None))
                    )
                played, *others = self.search.play_levels(levels, say)
                together = ", ".join(level.item.nodeid.rsplit("::", 1)[-1] for level in levels)
                for level, other_played in zip(levels[1:], others, strict=True):
                    self._banked[level.item.nodeid] = (level.sides, self._measured_with(other_played, together))
                played = self._measured_with(played, together) if others else played
                problem, crashed, search, pairing = played.crash, played.side, played.undecided, played.pairing
            else:
                played = self.search.play(item, sides, partial(self._progress, item, sides, say, level=None), say)
                problem, crashed, search, pairing = played.crash, played.side, played.undecided, played.pairing
        except KeyboardInterrupt:
            if sides[0].rounds:
                self._record(item, sides, "interrupted: partial results", incomplete=True)
            raise
        finally:
            self.reference_pool.stop()
        return self._record(
            item,
            sides,
            problem,
            crashed=crashed,
            search=search,
            capacity=capacity,
            add_figures=add_figures,
            pairing=pairing,
        )

    def _sides(self, item: PlannedItem) -> list[Side]:
        """The item's server, and its reference's or its canary's, where one is measured beside it."""
        config, load = item.config, item.load
        sides = [Side(config.server, config.workload, load)]
        canary = self.search.canary(item)
        if config.reference is not None:
            sides.append(Side(config.reference, config.reference_workload or config.workload, load))
        elif canary is not None:
            sides.append(
                Side(
                    canary, CANARY_WORKLOAD, replace(CANARY_LOAD, request_timeout_s=load.request_timeout_s), canary=True
                )
            )
        return sides

    def _on_the_same_boots(self, item: PlannedItem) -> list[PlannedItem]:
        """The sweep's other selected A/B levels, not measured yet, that boot what this item boots (the same two specs,
        as many servers of each) and pair in rounds: measured on its boots (run/paired.py). No level for an item that is
        not an A/B item searching for a verdict, nor where the sides cannot both be at hand (boot pairs)."""
        config = item.config
        if (
            config.reference is None
            or config.capacity is not None
            or self.search.pairing(config, config.server, config.reference).mode == "boots"
        ):
            return []
        measured = {result.nodeid for result in self.items} | set(self._banked)
        return [
            other
            for other in self.sweeps[item.test_key].selected.values()
            if other.nodeid != item.nodeid
            and other.nodeid not in measured
            and other.config.server == config.server
            and other.config.reference == config.reference
            and other.config.capacity is None
            and other.load.workers == item.load.workers
        ]

    @staticmethod
    def _measured_with(played: Played, together: str) -> Played:
        """How a level measured on shared boots ended, its pairing's note naming the levels measured on them."""
        return replace(played, pairing=f"{played.pairing or 'pairing'}; levels {together} measured on the same boots")

    def _progress(
        self, item: PlannedItem, sides: list[Side], say: Callable[[str], None] | None, side: Side, level: float | None
    ) -> Callable[[RoundRecord], None]:
        """The line said after each round of a side of the item (under -v): its pair and boot, or the capacity search's
        level, or its boot and round."""
        config, load = item.config, item.load

        def line(round_: RoundRecord) -> None:
            if say is None:
                return
            figures = round_figures(round_)
            played = sum(1 for r in side.rounds if r.boot == round_.boot)
            who = (
                (" canary" if side.canary else "")
                if config.reference is None
                else (" reference" if side is sides[-1] else " candidate")
            )
            where = (
                f"pair {round_.pair + 1} (boot {round_.boot + 1})"
                if round_.pair is not None
                else f"capacity search at {in_units(config.capacity.what, level)}"
                if config.capacity is not None and level is not None
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

    def _entry(self, nodeid: str) -> TestBaseline | None:
        return self.baselines.tests.get(nodeid) if self.baselines else None

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
        self,
        item: PlannedItem,
        sides: list[Side],
        problem: str | None,
        incomplete: bool = False,
        crashed: int | None = None,
        search: str | None = None,
        capacity: tuple[CapacityFound, ...] = (),
        add_figures: AddFigures | None = None,
        pairing: str | None = None,
    ) -> ItemResult:
        """The item's result; a crash is charged to the side it happened on (`crashed`), an interrupt to both.

        A reference that never played a round (the candidate's first boot already
        stopped the item) has no figures: the item then carries none for it, and
        its gate says the reference was never measured.
        """
        config = item.config
        played = [side for side in sides if side.rounds]
        results = [
            summarize(
                side.rounds,
                side.workload.pinned_tokens,
                side.load.workers,
                reference=None if side.canary else self.sweeps[item.test_key].single_agent(side.spec),
                memory=peak_memory(side.memory),
                problem=problem if crashed is None or side is sides[crashed] else None,
                interactive=config.interactive,
                goodput=config.goodput,
                price_per_hour=self.price_per_hour,
            )
            for side in played
        ]
        results = [
            replace(result, nodes=nodes_over_boots(side.nodes)) for result, side in zip(results, played, strict=True)
        ]
        if add_figures is not None and results:
            results[0] = replace(results[0], added=add_figures(results[0], sides[0].rounds))
        contradiction = None
        if not incomplete:
            found = [
                ("canary: " if side.canary else f"{side.spec.label}: " if config.reference is not None else "") + why
                for side, result in zip(played, results, strict=True)
                for why in contradictions(side.spec, side.info, side.workload, side.load, result)
            ]
            contradiction = "; ".join(found) or None
        other = (
            ReferenceSide(sides[1].spec, sides[1].info, results[1], capacity[1] if len(capacity) > 1 else None)
            if len(played) > 1
            else None
        )
        reference, canary = (None, other) if len(sides) > 1 and sides[1].canary else (other, None)
        measured = ItemResult(
            item,
            sides[0].spec,
            sides[0].info,
            results[0],
            incomplete=incomplete,
            problem=contradiction,
            reference=reference,
            search=search,
            pairing=pairing,
            canary=canary,
            capacity=capacity[0] if capacity else None,
            answer_lengths=fit.counted_by if (fit := sides[0].fit) is not None and fit.answer_tokens else None,
        )
        self.items.append(measured)
        self.sweeps[item.test_key].add(measured)
        return measured

    def conclude(self, measured: ItemResult) -> ItemResult:
        """Gate the item's measurement against its baseline, or record it as the new one; an A/B item against its
        reference only.

        The judged result replaces the measured one, in the run's items and its sweep's.
        """
        sweep = self.sweeps[measured.test_key]
        without_c1 = sweep.without_single_agent(measured.item)
        if measured.config.reference is not None:
            reference = measured.reference.result if measured.reference is not None else None
            found = measured.capacity
            outcome = evaluate_ab(
                measured.result,
                reference,
                measured.config,
                self.settings.gate,
                measured.search,
                without_c1,
                (found, measured.reference.capacity if measured.reference is not None else None) if found else None,
            )
        else:
            outcome = self._against_baseline(measured, without_c1)
        if measured.pairing is not None:
            outcome = replace(outcome, notes=(*outcome.notes, measured.pairing))
        concluded = replace(measured, outcome=outcome)
        self.items = [concluded if known is measured else known for known in self.items]
        sweep.add(concluded)
        return concluded

    def _against_baseline(self, measured: ItemResult, without_c1: str) -> GateOutcome:
        nodeid = measured.nodeid
        entry = self._entry(nodeid)
        canary = measured.canary.result if measured.canary is not None else None
        if self.settings.update_baselines:
            origin = runlog.provenance(self.rootdir)
            recorded = {**origin, "engine_version": measured.server_info.get("engine_version")}
            new = baseline_entry(
                measured.result, measured.config, measured.server.describe(), recorded, measured.capacity
            )
            if measured.canary is not None and canary is not None:
                new = with_canary(
                    new, measured.result.rounds, canary.rounds, measured.config.gate, measured.canary.server.describe()
                )
            baselines.update(self.baseline_path, self.hardware.name, self.hardware.fingerprint, origin, {nodeid: new})
            entry = new
        return evaluate(
            measured.result,
            measured.config,
            entry,
            self.settings.gate,
            canary,
            measured.search,
            without_c1,
            measured.capacity,
        )

    def ended(self, nodeid: str) -> None:
        """An item ended, measured or not: its sweep computes its figures once its last item has."""
        for sweep in self.sweeps.values():
            if nodeid in sweep.selected:
                sweep.end(nodeid)

    def sweep_figures(self) -> list[SweepFigures]:
        return [sweep.figures() for sweep in self.sweeps.values()]

    def summary(self, verbose: bool) -> list[tuple[str, bool]]:
        """The terminal's swarm section, each line with whether it is a warning."""
        return summary(self.items, self.sweep_figures(), self.hardware.name, self.settings, self.baseline_path, verbose)

    def write_reports(self, complete: bool) -> None:
        """Append the run to the results store, then write the reports with its trends; a store that fails leaves
        `history_problem`."""
        trends: list[Trend] = []
        if self.history is not None:
            run = runlog.run_record(
                self.items, self.hardware.name, runlog.provenance(self.rootdir), self.started_at, complete
            )
            trends, self.history_problem = runlog.finish(self.history, run, self.items)
        write_reports(
            self.settings.reports,
            self.hardware.name,
            self.hardware.fingerprint,
            self.items,
            self.sweep_figures(),
            complete,
            trends,
        )

    def close(self) -> None:
        try:
            self.pool.stop()
            self.reference_pool.stop()
        finally:
            if self.ray is not None:
                self.ray.stop()
