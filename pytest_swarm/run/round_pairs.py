"""Pairs of rounds with both sides at hand, booted afresh for each sample; levels of a sweep that boot the same
servers share each boot."""

from __future__ import annotations

import random
import time
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Protocol

from ..core.records import RoundRecord
from ..engines.pool import Servers
from ..engines.process import RunningServer
from ..figures.summary import RoundFigures
from ..gate.capacity import CapacityFound
from ..gate.samples import PAIRS_PER_BOOT, disturbed, pairs_per_boot
from ..load.planner import RoundPlanner
from ..load.rounds import PairBlock, PairSide
from ..results.item import PairingNote
from ..settings import PluginSettings
from ..specs import MarkerConfig, PlannedItem, ServerSpec
from ..telemetry.gpus import GpuMemory
from ..telemetry.memory import Sampler
from .pairing import Pairing, Turns, fractions_fit, room_after_boot
from .players import Players
from .sides import Side

Progress = Callable[[Side], Callable[[RoundRecord], None]]
"""The line said after each round of a side (under -v), made per side."""


@dataclass(frozen=True)
class Played:
    """How an item's measuring ended: what died and on which side (0: the item's server), or why the search ended
    undecided."""

    crash: str | None = None
    """A server's crash report (exit status or signal, and its log's tail); None when none died."""
    side: int | None = None
    """The side the crash happened on; None when none did (an interrupt or the guard is charged to both)."""
    undecided: str | None = None
    """The budget a search for a verdict spent before it decided (max_pairs, max_seconds); None when it decided, or
    for an item that plays a fixed number of boots."""
    pairing: PairingNote | None = None
    """How two sides were paired and why (pairing.py), with what their switches cost; None for one side."""
    found: tuple[CapacityFound, ...] = ()
    """A capacity item's searches as they ended: the candidate's first, then the reference's (an A/B capacity item)."""


@dataclass(frozen=True)
class Stop:
    """Why a search for a verdict stops after a sample."""

    undecided: str | None = None
    """None: the claims are decided (or a canary item played the boots and rounds it asked for); else the budget
    that ran out before they were."""


DECIDED = Stop()


class PairRule(Protocol):
    """What decides a paired item's search: an A/B item's claims, or a stored baseline's against its canary."""

    @property
    def recording(self) -> bool:
        """Whether the pairs record a baseline (they stop once precise enough) rather than test claims."""
        ...

    @property
    def fixed(self) -> bool:
        """Whether the marker fixed the pairs (boots= or rounds= of a canary item): exactly boots x rounds."""
        ...

    def settled(self, item: Sequence[RoundFigures], other: Sequence[RoundFigures]) -> bool:
        """Whether the samples so far decide the item."""
        ...


StopRule = Callable[["Level", float, int], Stop | None]
"""After a sample of a level: None to measure another, else why its search stops (search.py's `stop`)."""
Repair = Callable[[MarkerConfig, ServerSpec, ServerSpec, tuple[bool, str]], Pairing]
"""The pairing chosen again once NVML has shown what room there is (search.py's `pairing`)."""


@dataclass
class Level:
    """One item played on the boots: its sides, its progress lines, its pairs so far, how it ended."""

    item: PlannedItem
    sides: list[Side]
    progress: Progress
    rule: PairRule
    planners: list[RoundPlanner] = field(default_factory=list)
    """Each side's planner, made at the first boot and kept for the item: the two halves of a pair send the same base
    prompts, each side drawing from its own counter."""
    played: int = 0
    ended: Played | None = None
    spent_s: float = 0.0
    """Seconds the level has cost: the boots it played on, and its own blocks of pairs."""
    fixed: int | None = field(init=False)
    """The pairs every boot plays, where the marker says (rounds= of a canary item with boots=, or reboot_every=)."""
    per_boot: int = field(init=False)
    """The pairs the next boot plays: `fixed`, or as the costs measured so far set it."""
    draw: random.Random = field(init=False)
    """The order of each pair, seeded by the item's id: a rerun draws the same orders."""

    def __post_init__(self) -> None:
        config = self.item.config
        self.fixed = config.rounds if self.rule.fixed else config.budget.reboot_every
        self.per_boot = self.fixed or PAIRS_PER_BOOT[0]
        self.draw = random.Random(zlib.crc32(self.item.nodeid.encode()))


class RoundPairs:
    """Plays levels in pairs of rounds on the two pools: the candidate's (or item's), the reference's (or canary's)."""

    def __init__(
        self,
        settings: PluginSettings,
        pools: tuple[Servers, Servers],
        players: Players,
        devices: Callable[[], tuple[GpuMemory, ...] | str],
        repair: Repair,
        stop: StopRule,
    ) -> None:
        self.settings = settings
        self.pools = pools
        self.players = players
        self._devices = devices
        self._repair = repair
        self._stop = stop

    def play(self, levels: Sequence[Level], pairing: Pairing, say: Callable[[str], None] | None) -> Pairing | None:
        """Both sides booted, each open level's pairs in turn, until every level ended. A crash ends every open
        level."""
        turns = Turns(self.pools, pairing.pause)
        boot = 0
        try:
            while True:
                boot_started = time.monotonic()
                booted, pairing = self._boot_both(levels[0], pairing, turns, boot)
                if booted is None:
                    return pairing
                boot_s = time.monotonic() - boot_started
                crossed = pairing.mode == "crossover"  # a sample is two boots, the GPUs swapped between them
                open_levels = [level for level in levels if level.ended is None]
                for level in open_levels if boot % 2 == 0 else open_levels[::-1]:
                    block_started = time.monotonic()
                    self._block(level, booted, pairing, turns, boot, boot_s)
                    level.spent_s += boot_s + time.monotonic() - block_started
                    said = PairingNote(
                        pairing.mode, pairing.why, turns.said() if pairing.mode == "sleeping" else None
                    )  # what the switches cost so far
                    for index, pool in enumerate(self.pools):
                        problem = pool.crash_report()
                        if problem is not None:
                            for other in levels:
                                other.ended = other.ended or Played(problem, index, pairing=said)
                            return None
                    if any(side.rounds and side.rounds[-1].aborted for side in level.sides):
                        level.ended = Played(pairing=said)
                        continue
                    halfway = crossed and boot % 2 == 0 and level.played < level.item.config.budget.max_pairs
                    started = time.monotonic() - level.spent_s  # as if it had played alone
                    ended = None if halfway else self._stop(level, started, level.played)
                    if ended is not None:
                        level.ended = Played(undecided=ended.undecided, pairing=said)
                    elif say is not None:
                        say(
                            f"  {level.item.nodeid.rsplit('::', 1)[-1]}: boot {boot + 1} of both sides done, "
                            f"{level.played} pairs so far, undecided"
                        )
                if all(level.ended is not None for level in levels):
                    return None
                boot += 1
        finally:
            if turns.sleeps:  # no server left asleep for a later item to find
                self.pools[0].stop()

    def _block(
        self,
        level: Level,
        booted: list[list[RunningServer]],
        pairing: Pairing,
        turns: Turns,
        boot: int,
        boot_s: float,
    ) -> None:
        """One level's pairs on this boot: its `per_boot`, set anew from the costs measured."""
        config = level.item.config
        crossed = pairing.mode == "crossover"
        block_started = time.monotonic()
        runs = self._pair_sides(level, booted, pairing, turns)
        wanted = min(level.per_boot, config.budget.max_pairs - level.played)
        kept = [len(side.rounds) for side in level.sides]
        block = PairBlock(
            boot // 2 if crossed else boot,
            level.played,
            wanted,
            min(2 * wanted, config.budget.max_pairs - level.played),
            lambda: level.draw.random() < 0.5,
            lambda a, b: disturbed([a], [b]),
        )
        now = self.players.pairs([run for _, run in runs], block)
        level.played += now
        if level.fixed is None and now and not (crossed and boot % 2 == 0):
            pair_s = sum(r.wall_s for side, k in zip(level.sides, kept, strict=True) for r in side.rounds[k:]) / now
            level.per_boot = pairs_per_boot(boot_s + time.monotonic() - block_started - now * pair_s, pair_s)
        for side, (sampler, _) in zip(level.sides, runs, strict=True):
            side.memory += [sampler.figures()] if sampler is not None else []

    def _boot_both(
        self, first: Level, pairing: Pairing, turns: Turns, boot: int
    ) -> tuple[list[list[RunningServer]] | None, Pairing]:
        """Both sides' servers booted afresh as `pairing` places them, with the pairing a choice waiting on NVML made
        (`probe`).

        Sides on their own GPUs boot at once; on the CPU one after the other, since they share its cores, unless
        their engine boots anywhere and pins once ready (engine.py); on a shared GPU one after the other, the first
        asleep. Which side boots first alternates, so the order cannot read as a difference between them."""
        config, sides, pools = first.item.config, first.sides, self.pools
        specs = [self._booted_spec(index, side.spec, pools[index], pairing, boot) for index, side in enumerate(sides)]
        shared = sorted(set(specs[0].gpus) & set(specs[1].gpus))
        order = (0, 1) if pairing.probe else first_then_second(boot)  # NVML measures what the item's side took
        if not shared:
            anywhere = [pools[i].anywhere(spec) for i, spec in enumerate(specs)]
            specs = [spread or spec for spread, spec in zip(anywhere, specs, strict=True)] if all(anywhere) else specs
            at_once = 2 if (specs[0].gpus and specs[1].gpus) or all(anywhere) else 1  # 1: one boot after the other
            with ThreadPoolExecutor(max_workers=at_once) as booting:
                started = {i: booting.submit(pools[i].get, specs[i], sides[i].load.workers, fresh=True) for i in order}
                booted = [started[0].result(), started[1].result()]
            turns.awake = {0, 1}
            return booted, pairing
        for pool in pools:  # the last boot's servers and their memory gone before either boots again
            pool.stop()
        first_side, second = order
        before = self._devices() if pairing.probe or pairing.fractions is not None else ()
        if pairing.fractions is not None and not (fit := fractions_fit(before, shared, pairing.fractions))[0]:
            pairing = self._repair(config, sides[0].spec, sides[1].spec, fit)  # another job holds some of the GPU
            specs = [self._booted_spec(i, side.spec, pools[i], pairing, boot) for i, side in enumerate(sides)]
        if pairing.mode == "boots":  # chosen just now: NVML showed the fractions no room
            return None, pairing
        up = {first_side: pools[first_side].get(specs[first_side], sides[first_side].load.workers, fresh=True)}
        turns.awake = {first_side}
        if pairing.probe:  # first_side == 0
            pairing = self._repair(
                config, sides[0].spec, sides[1].spec, room_after_boot(before, self._devices(), shared)
            )
            if pairing.mode == "boots":
                pools[0].stop()
                return None, pairing
            specs[1] = self._booted_spec(1, sides[1].spec, pools[1], pairing, boot)
        if pairing.mode == "sleeping":
            turns.put_to_sleep(first_side)
        up[second] = pools[second].get(specs[second], sides[second].load.workers, fresh=True)
        turns.awake.add(second)
        return [up[0], up[1]], pairing

    def _pair_sides(
        self, level: Level, booted: list[list[RunningServer]], pairing: Pairing, turns: Turns
    ) -> list[tuple[Sampler | None, PairSide]]:
        """Each side's part of a level's pairs on this boot: servers, planner, memory sampler, turn."""
        config, sides = level.item.config, level.sides
        fits = [side.booted(config, s[0].info, s[0].endpoint) for side, s in zip(sides, booted, strict=True)]
        level.planners[:] = level.planners or [
            RoundPlanner(side.workload, side.load, config.prompt_base, side.prompts, side.load.workers, fit)
            for side, fit in zip(sides, fits, strict=True)
        ]
        runs = []
        for index, (pool, side, planner, servers) in enumerate(
            zip(self.pools, sides, level.planners, booted, strict=True)
        ):
            sampler = (
                Sampler(pool.pids, self.settings.telemetry.interval_s, self.settings.telemetry.guard)
                if pool.pids()
                else None
            )
            endpoints, probes = [s.endpoint for s in servers], [s.probe for s in servers]
            turn = partial(turns.to, index) if pairing.mode == "sleeping" else None
            runs.append(
                (
                    sampler,
                    PairSide(
                        endpoints,
                        side.workload,
                        side.load,
                        planner,
                        side.rounds,
                        probes,
                        sampler,
                        level.progress(side),
                        turn,
                    ),
                )
            )
        return runs

    @staticmethod
    def _booted_spec(index: int, spec: ServerSpec, pool: Servers, pairing: Pairing, boot: int) -> ServerSpec:
        """The spec as this boot of side `index` runs it: on the GPUs a crossover gives it, booted to sleep where the
        side may have to (its engine's sleep mode)."""
        gpus = pairing.gpus_at(index, boot)
        if gpus is not None:
            spec = replace(spec, gpus=gpus)
        if (pairing.mode == "sleeping" and not pairing.pause) or pairing.probe:
            spec = pool.sleeping(spec) or spec
        return spec


def first_then_second(boot: int) -> tuple[int, int]:
    """The two sides in the order their `boot` starts them: each side first at every other boot."""
    return (0, 1) if boot % 2 == 0 else (1, 0)
