"""The run's measuring state: the server pools, the baselines, every item's result.

`measure` turns one collected item into an ItemResult (boots, warm-up, rounds,
figures); `conclude` judges it against its baseline. The fixture calls the first,
the runtest wrapper the second, and the item's result travels between them on the
item itself, never looked up again.
"""

from __future__ import annotations

import random
import time
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from .canary import CANARY_LOAD, CANARY_WORKLOAD
from .engines.pool import ServerPool
from .engines.process import EngineMissing
from .engines.registry import check_installed
from .figures.checks import contradictions
from .figures.summary import NodeFigures, nodes_over_boots, round_figures, summarize
from .gate.canary import canary_comparisons, recorded_precisely, with_canary
from .gate.entries import TestBaseline
from .gate.pairs import PAIRS_PER_BOOT, disturbed, pairs_per_boot
from .gate.trends import Trend
from .gate.verdict import GateOutcome, baseline_entry, decided, evaluate, evaluate_ab, paired_comparisons
from .load.planner import RoundPlanner
from .load.prompts import ColdPrompts
from .load.rounds import PairBlock, PairSide, run_load, run_pairs
from .records import RoundRecord, ServerInfo
from .report.files import write_reports
from .report.text import summary
from .results import ItemResult, ReferenceSide
from .settings import PluginSettings
from .specs import Load, MarkerConfig, PlannedItem, ServerSpec, Workload
from .stores import baselines, runlog
from .stores.history import open_store
from .sweeps import SweepFigures, sweeps_of
from .telemetry.hardware import HardwareProfile
from .telemetry.memory import MemoryFigures, Sampler, peak_memory

if TYPE_CHECKING:
    from .load.ray.backend import RayBackend


class MeasuringSession:
    def __init__(self, settings: PluginSettings, hardware: HardwareProfile, rootdir: Path, selected: Sequence[PlannedItem]) -> None:
        self.settings = settings
        self.hardware = hardware
        self.rootdir = rootdir
        self.baseline_path = settings.baseline_dir / f"{hardware.name}.yaml"
        self.baselines = baselines.load(self.baseline_path)  # a broken file stops the run before anything boots
        self.history = open_store(settings.history)  # so does a results store that cannot be reached or written
        self.history_problem: str | None = None
        self.started_at = runlog.utc_now()
        self.pool = ServerPool(settings.launch, settings.locks)
        self.reference_pool = ServerPool(settings.launch, settings.locks)
        """An A/B item's reference, up beside the candidate's servers while the item pairs rounds; stopped when it ends."""
        self.items: list[ItemResult] = []
        """Every measured item, in the order measured; concluded, each is replaced by its judged form."""
        self.sweeps = sweeps_of(selected)
        """The selected items by sweep (marker): what contention and speedup are read against, and the figures across levels."""
        self.ray: RayBackend | None = None

    def missing_engine(self, spec: ServerSpec) -> str | None:
        """What to install when the spec's engine cannot start here; None when it can."""
        try:
            check_installed(spec, self.settings.launch)
        except EngineMissing as exc:
            return str(exc)
        return None

    def measure(self, item: PlannedItem, say: Callable[[str], None] | None = None) -> ItemResult:
        """On each of the config's boots (the first may reuse running servers): warm-up and rounds.

        An A/B item (`reference=`) measures candidate and reference in pairs until its
        claims are decided or its budget is spent: both up, a round a side, rebooted
        every few pairs (the reference in a pool of its own, stopped when the item
        ends); or, where both cannot be up, a boot a side, A B B A ...
        Stops early when a round was aborted by the guard or a server died; what was
        measured is kept. Interrupted (Ctrl-C), it records what it has, marked
        incomplete, before the interrupt goes on. `say` hears a line per measured round.
        """
        config, load = item.config, item.load
        sides = [_Side(config.server, config.workload, load)]
        canary = self._canary(item)
        if config.reference is not None:
            sides.append(_Side(config.reference, config.workload, load))
        elif canary is not None:
            sides.append(_Side(canary, CANARY_WORKLOAD, replace(CANARY_LOAD, request_timeout_s=load.request_timeout_s), canary=True))
        boots = config.boots

        def progress(side: _Side) -> Callable[[RoundRecord], None]:
            def line(round_: RoundRecord) -> None:
                if say is not None:
                    figures = round_figures(round_)
                    played = sum(1 for r in side.rounds if r.boot == round_.boot)
                    who = (" canary" if side.canary else "") if config.reference is None else (" reference" if side is sides[-1] else " candidate")
                    where = (
                        f"pair {round_.pair + 1} (boot {round_.boot + 1})" if round_.pair is not None
                        else f"boot {round_.boot + 1}{f'/{boots}' if len(sides) == 1 else ''} round {played}/{load.rounds}"
                    )
                    say(
                        f"  {item.nodeid.rsplit('::', 1)[-1]}:{who} {where}: "
                        f"{figures.requests - figures.failures}/{figures.requests} requests ok, {figures.effective_tps:.1f} tok/s, "
                        f"wall {figures.wall_s:.2f} s" + (f" ({round_.aborted})" if round_.aborted else "")
                    )

            return line

        problem: str | None = None
        crashed: int | None = 0
        search: str | None = None
        try:
            if len(sides) == 1:
                for _, boot in boot_order(boots, 1):
                    problem = self._play_boot(item, sides[0], boot, boot > 0, progress(sides[0]))
                    if problem or (sides[0].rounds and sides[0].rounds[-1].aborted):
                        break
            elif canary is not None or self._pairs_in_rounds(config):
                problem, crashed, search = self._play_round_pairs(item, sides, progress, say)
            else:
                problem, crashed, search = self._play_boot_pairs(item, sides, progress, say)
        except KeyboardInterrupt:
            if sides[0].rounds:
                self._record(item, sides, "interrupted: partial results", incomplete=True)
            raise
        finally:
            self.reference_pool.stop()
        return self._record(item, sides, problem, crashed=crashed, search=search)

    def _pairs_in_rounds(self, config: MarkerConfig, other: ServerSpec | None = None) -> bool:
        """Whether the item's server and `other` (the A/B reference when None) can be up together: asked for, on this
        machine's loop, and no GPUs to share."""
        both = (config.server, config.reference if other is None else other)
        return (
            config.pairing == "rounds" and config.generators == 1 and self.settings.ray is None
            and not any(spec is not None and spec.gpus for spec in both)
        )

    def _entry(self, nodeid: str) -> TestBaseline | None:
        return self.baselines.tests.get(nodeid) if self.baselines else None

    def _canary(self, item: PlannedItem) -> ServerSpec | None:
        """The canary a stored-baseline item is interleaved with: when recording, or checking an entry recorded with one.

        An entry recorded without a canary is checked the old way, on absolute figures
        (its gate says so); items whose servers hold GPUs, run on several generators or
        on Ray are too (both servers cannot be up side by side on one loop).
        """
        config = item.config
        if config.canary is None or config.reference is not None or not self._pairs_in_rounds(config, config.canary):
            return None
        entry = self._entry(item.nodeid)
        return config.canary if self.settings.update_baselines or (entry is not None and entry.canary is not None) else None

    def _settled(self, item: PlannedItem, sides: list[_Side]) -> bool:
        """Whether the samples so far decide the item: an A/B item's or a checked entry's claims, or a recording precise enough."""
        config = item.config
        item_rounds, other = ([round_figures(r, config.goodput) for r in side.rounds] for side in sides)
        if config.reference is not None:
            return decided(paired_comparisons(item_rounds, other, config, self.settings.gate.alpha)[0])
        entry = self._entry(item.nodeid)
        if entry is None or self.settings.update_baselines:
            return recorded_precisely(item_rounds, other, config.gate, config.tolerance)
        return decided(canary_comparisons(item_rounds, other, config.gate, config.tolerance, entry, self.settings.gate.alpha)[0])

    def _search(self, item: PlannedItem, sides: list[_Side], started: float, pairs: int) -> str | None:
        """After a sample: None to measure another; else why the search stops (decided, or the budget spent, which the gate reports).

        A canary item with boots= or rounds= plays exactly that many boots of that many pairs.
        """
        config = item.config
        if config.reference is None and config.fixed:
            return "decided" if pairs >= config.boots * config.rounds else None
        if self._settled(item, sides) and pairs >= config.min_pairs:
            return "decided"
        recording = config.reference is None and (self.settings.update_baselines or self._entry(item.nodeid) is None)
        what = (
            "the recording ended before its mean ratio to the canary was precise to a fifth of the tolerance,"
            if recording else "the search ended undecided"
        )
        if pairs >= config.max_pairs:
            return f"{what} at max_pairs={config.max_pairs}"
        if time.monotonic() - started >= config.max_seconds:
            return f"{what} at its time budget, max_seconds={config.max_seconds:g} (after {pairs} pairs)"
        return None

    def _play_round_pairs(
        self, item: PlannedItem, sides: list[_Side], progress: Callable[[_Side], Callable[[RoundRecord], None]], say: Callable[[str], None] | None
    ) -> tuple[str | None, int | None, str | None]:
        """Both sides booted together, `reboot_every` pairs of rounds in random order, booted again, ... until decided.

        The second side is an A/B item's reference, or a stored-baseline item's canary.

        Each boot of both sides is one sample of the decision (gate/pairs.py). Each
        side's planner lives for the whole item and draws from its own prompt
        counter, so the two halves of a pair send the same base prompts (with nonces of
        their own): prompts of other lengths in one half would be a difference between
        the sides that no server made. The order of each pair is drawn from a generator
        seeded by the item's id, so a rerun draws the same orders. Returns what died
        (and on which side), and why the search ended undecided.
        """
        config = item.config
        draw = random.Random(zlib.crc32(item.nodeid.encode()))
        started = time.monotonic()
        pools = (self.pool, self.reference_pool)
        planners = [RoundPlanner(side.workload, side.load, config.prompt_base, side.prompts, side.load.workers) for side in sides]
        fixed = config.rounds if config.reference is None and config.fixed else config.reboot_every
        per_boot = fixed or PAIRS_PER_BOOT[0]
        played, boot = 0, 0
        while True:
            block_started = time.monotonic()
            runs = []
            with ThreadPoolExecutor(max_workers=2) as booting:  # both sides boot at once: a boot is a third of a sample's time
                booted = list(booting.map(lambda pool, side: pool.get(side.spec, side.load.workers, fresh=True), pools, sides))
            for pool, side, planner, servers in zip(pools, sides, planners, booted):
                side.info = servers[0].info.copy()
                sampler = Sampler(pool.pids, self.settings.telemetry.interval_s, self.settings.telemetry.guard) if pool.pids() else None
                endpoints, probes = [s.endpoint for s in servers], [s.probe for s in servers]
                runs.append((side, sampler, PairSide(endpoints, side.workload, side.load, planner, side.rounds, probes, sampler, progress(side))))
            wanted = min(per_boot, config.max_pairs - played)
            block = PairBlock(
                boot, played, wanted, min(2 * wanted, config.max_pairs - played),
                lambda: draw.random() < 0.5, lambda a, b: disturbed([round_figures(a)], [round_figures(b)]),
            )
            now = run_pairs([run for _, _, run in runs], block)
            played += now
            if fixed is None and now:  # the next boot plays what gives the most information a second at these costs
                pair_s = sum(r.wall_s for side in sides for r in side.rounds if r.boot == boot) / now
                per_boot = pairs_per_boot(time.monotonic() - block_started - now * pair_s, pair_s)
            for side, sampler, _ in runs:
                side.memory += [sampler.figures()] if sampler is not None else []
            for index, pool in enumerate(pools):
                problem = pool.crash_report()
                if problem is not None:
                    return problem, index, None
            if any(side.rounds and side.rounds[-1].aborted for side in sides):
                return None, None, None
            ended = self._search(item, sides, started, played)
            if ended is not None:
                return None, None, None if ended == "decided" else ended
            if say is not None:
                say(f"  {item.nodeid.rsplit('::', 1)[-1]}: boot {boot + 1} of both sides done, {played} pairs so far, undecided")
            boot += 1

    def _play_boot_pairs(
        self, item: PlannedItem, sides: list[_Side], progress: Callable[[_Side], Callable[[RoundRecord], None]], say: Callable[[str], None] | None
    ) -> tuple[str | None, int | None, str | None]:
        """One side up at a time (they share GPUs, or run through generators or Ray): a boot a side per pair, A B, B A, ..."""
        config = item.config
        started = time.monotonic()
        for index, boot in boot_order(config.max_pairs, 2):
            side = sides[index]
            problem = self._play_boot(item, side, boot, True, progress(side))
            if problem or (side.rounds and side.rounds[-1].aborted):
                return problem, index, None
            if index == (1 if boot % 2 == 0 else 0):  # the pair is complete
                ended = self._search(item, sides, started, boot + 1)
                if ended is not None:
                    return None, None, None if ended == "decided" else ended
                if say is not None:
                    say(f"  {item.nodeid.rsplit('::', 1)[-1]}: pair of boots {boot + 1} done, undecided")
        return None, None, None

    def _play_boot(self, item: PlannedItem, side: _Side, boot: int, fresh: bool, on_round: Callable[[RoundRecord], None]) -> str | None:
        """One boot of one side: its servers (here, or on the Ray cluster), warm-up and rounds; what died, if anything."""
        config, load = item.config, item.load

        cluster = self._ray()
        if cluster is not None and config.mode == "process":
            self.pool.stop()
            placed = cluster.servers(side.spec, load.workers, fresh, config.ray_resources)
            side.info = placed.booted[0].info.copy()
            run = cluster.server_run(placed, config.workload, load, self.settings.telemetry)
            planner = RoundPlanner(config.workload, load, config.prompt_base, side.prompts, len(placed.endpoints))
            _, figures = run_load(
                placed.endpoints, config.workload, load, planner, boot, None, list, side.rounds, placed.probes, on_round, run.players, run.watch
            )
            problem = cluster.crash_report()
        else:
            if cluster is not None:
                cluster.stop_servers()
            servers = self.pool.get(side.spec, load.workers, fresh=fresh)
            side.info = servers[0].info.copy()
            run = None
            if cluster is not None and load.generators > 1:
                run = cluster.generator_run([s.endpoint for s in servers], config.workload, load, config.ray_resources)
            planner = RoundPlanner(config.workload, load, config.prompt_base, side.prompts, len(servers))
            _, figures = run_load(
                [s.endpoint for s in servers], config.workload, load, planner, boot, self.settings.telemetry if self.pool.pids() else None,
                self.pool.pids, side.rounds, [s.probe for s in servers], on_round, run.players if run is not None else None,
            )
            problem = self.pool.crash_report()
        side.memory += [figures] if figures is not None else []
        side.nodes += [run.nodes()] if run is not None else []
        return problem

    def _ray(self) -> RayBackend | None:
        """The Ray cluster of --swarm-ray, joined at its first item; None without the option (Ray is then never imported)."""
        if self.settings.ray is None:
            return None
        if self.ray is None:
            from .load.ray.cluster import prepare  # here: only a run with --swarm-ray imports Ray, and only after this

            prepare(self.settings.ray)  # a loopback cluster is held to loopback before Ray's import
            from .load.ray.backend import RayBackend

            self.ray = RayBackend(self.settings.ray, self.settings.launch, self.settings.locks)
        return self.ray

    def _record(
        self, item: PlannedItem, sides: list[_Side], problem: str | None, incomplete: bool = False, crashed: int | None = None,
        search: str | None = None,
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
                side.workload.max_tokens if side.workload.pinned else None,
                side.load.workers,
                reference=None if side.canary else self.sweeps[item.test_key].single_agent(side.spec),
                memory=peak_memory(side.memory),
                problem=problem if crashed is None or side is sides[crashed] else None,
                interactive=config.interactive,
                goodput=config.goodput,
            )
            for side in played
        ]
        results = [replace(result, nodes=nodes_over_boots(side.nodes)) for result, side in zip(results, played)]
        contradiction = None
        if not incomplete:
            found = [
                ("canary: " if side.canary else f"{side.spec.label}: " if config.reference is not None else "") + why
                for side, result in zip(played, results)
                for why in contradictions(side.spec, side.info, side.workload, side.load, result)
            ]
            contradiction = "; ".join(found) or None
        other = ReferenceSide(sides[1].spec, sides[1].info, results[1]) if len(played) > 1 else None
        reference, canary = (None, other) if len(sides) > 1 and sides[1].canary else (other, None)
        measured = ItemResult(
            item, sides[0].spec, sides[0].info, results[0], incomplete=incomplete, problem=contradiction, reference=reference, search=search,
            canary=canary,
        )
        self.items.append(measured)
        self.sweeps[item.test_key].add(measured)
        return measured

    def conclude(self, measured: ItemResult) -> ItemResult:
        """Gate the item's measurement against its baseline, or record it as the new one; an A/B item against its reference only.

        The judged result replaces the measured one, in the run's items and its sweep's.
        """
        sweep = self.sweeps[measured.test_key]
        without_c1 = sweep.without_single_agent(measured.item)
        if measured.config.reference is not None:
            reference = measured.reference.result if measured.reference is not None else None
            outcome = evaluate_ab(measured.result, reference, measured.config, self.settings.gate, measured.search, without_c1)
        else:
            outcome = self._against_baseline(measured, without_c1)
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
            new = baseline_entry(measured.result, measured.config, measured.server.describe(), recorded)
            if measured.canary is not None and canary is not None:
                new = with_canary(new, measured.result.rounds, canary.rounds, measured.config.gate, measured.canary.server.describe())
            baselines.update(self.baseline_path, self.hardware.name, self.hardware.fingerprint, origin, {nodeid: new})
            entry = new
        return evaluate(measured.result, measured.config, entry, self.settings.gate, canary, measured.search, without_c1)

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
        """Append the run to the results store, then write the reports with its trends; a store that fails leaves `history_problem`."""
        trends: list[Trend] = []
        if self.history is not None:
            run = runlog.run_record(self.items, self.hardware.name, runlog.provenance(self.rootdir), self.started_at, complete)
            trends, self.history_problem = runlog.finish(self.history, run, self.items)
        write_reports(self.settings.reports, self.hardware.name, self.hardware.fingerprint, self.items, self.sweep_figures(), complete, trends)

    def close(self) -> None:
        try:
            self.pool.stop()
            self.reference_pool.stop()
        finally:
            if self.ray is not None:
                self.ray.stop()


class _Side:
    """One server spec's share of an item's measuring: its rounds, memory figures and what its server said of itself.

    A canary side plays the canary's own workload and load, not the item's.
    """

    def __init__(self, spec: ServerSpec, workload: Workload, load: Load, canary: bool = False) -> None:
        self.spec = spec
        self.workload = workload
        self.load = load
        self.canary = canary
        self.prompts = ColdPrompts()
        """The side's own prompt counter: both sides of an A/B item cycle through the same base prompts in step."""
        self.rounds: list[RoundRecord] = []
        self.memory: list[MemoryFigures] = []
        self.nodes: list[tuple[NodeFigures, ...]] = []
        """Per boot, a row per Ray node (--swarm-ray)."""
        self.info: ServerInfo = {}


def boot_order(boots: int, sides: int) -> list[tuple[int, int]]:
    """(side, boot index on that side) in the order to boot them: one side's boots in a row, or pairs A B, B A, A B, ...

    Alternating the order within pairs (A B B A) puts each side first as often as
    second, so a runner that speeds up or slows down during the item cannot favour one.
    """
    if sides == 1:
        return [(0, boot) for boot in range(boots)]
    return [(side, boot) for boot in range(boots) for side in ((0, 1) if boot % 2 == 0 else (1, 0))]
