"""The search for a verdict: one side's boots of rounds, or both sides' pairs until the gate decides or the budget
ends."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

from ..core.records import RoundRecord
from ..engines.pool import Servers
from ..gate.capacity import CapacityFound
from ..gate.looks import LAST_LOOK
from ..gate.samples import samples
from ..load.planner import RoundPlanner
from ..results.item import PairingNote
from ..settings import PluginSettings
from ..specs import CapacityRange, MarkerConfig, PlannedItem, ServerSpec
from ..telemetry.gpus import GpuMemory, gpu_memory
from .capacity_play import CapacityPlay
from .pairing import Pairing, choose
from .players import REAL_PLAYERS, Players
from .round_pairs import DECIDED, Level, Played, Progress, RoundPairs, Stop, first_then_second
from .sides import Side
from .stage import stage

if TYPE_CHECKING:
    from ..load.ray.backend import RayBackend


class Search:
    """Plays an item's sides on the session's pools: the candidate's (and a plain item's) and the reference's or
    canary's."""

    def __init__(
        self,
        settings: PluginSettings,
        pool: Servers,
        reference_pool: Servers,
        ray: Callable[[], RayBackend | None],
        players: Players = REAL_PLAYERS,
        devices: Callable[[], tuple[GpuMemory, ...] | str] = gpu_memory,
    ) -> None:
        """`devices` reads the GPUs' memory (NVML); the fast tests of run/ pass fake GPUs."""
        self.settings = settings
        self.pool = pool
        self.reference_pool = reference_pool
        self._ray = ray
        self.players = players
        self._devices = devices
        self._pairs = RoundPairs(settings, (pool, reference_pool), players, devices, self.pairing, self.stop)

    def play_alone(self, item: PlannedItem, side: Side, progress: Progress) -> Played:
        """One side's boots in a row: a plain item's."""
        for _, boot in boot_order(item.config.boots, 1):
            problem = self._boot(item, side, boot, boot > 0, progress(side))
            if problem or (side.rounds and side.rounds[-1].aborted):
                return Played(problem, 0)
        return Played()

    def play_levels(self, levels: Sequence[Level], say: Callable[[str], None] | None) -> list[Played]:
        """Items of two sides that boot the same servers, paired on the same boots where both can be at hand."""
        first = levels[0]
        pairing = self.pairing(first.item.config, first.sides[0].spec, first.sides[1].spec)
        if pairing.mode != "boots":
            fallback = self._pairs.play(levels, pairing, say)
            if fallback is None:
                return [level.ended or Played() for level in levels]
            pairing = fallback  # NVML found no room beside the first side, and nothing else applies
        return [replace(self._boot_pairs(level, say), pairing=PairingNote("boots", pairing.why)) for level in levels]

    def capacity(
        self,
        item: PlannedItem,
        wanted: CapacityRange,
        sides: list[Side],
        progress: Callable[[Side, float], Callable[[RoundRecord], None]],
        required: float | None,
    ) -> Played:
        """Each side's capacity search, the candidate's first; the reference's alone, as the candidate would take its
        cores."""
        found: list[CapacityFound] = []
        for index, (side, pool) in enumerate(zip(sides, (self.pool, self.reference_pool), strict=False)):
            if index:
                self.pool.stop()
            play = CapacityPlay(
                self.settings, item, wanted, side, pool, self._ray(), required if index == 0 else None, self.players
            )
            problem, result = play.play(partial(progress, side), time.monotonic())
            found.append(result)
            if problem is not None:
                return Played(problem, index, found=tuple(found))
        return Played(found=tuple(found))

    def pairing(
        self, config: MarkerConfig, first: ServerSpec, second: ServerSpec, room: tuple[bool, str] | None = None
    ) -> Pairing:
        """How the two specs are paired on this runner (pairing.py); `room`: what NVML showed after the first side's
        boot, when the choice waited for it."""
        sleepable = (self.pool.sleeping(first) is not None, self.reference_pool.sleeping(second) is not None)
        devices = self._devices() if first.gpus or second.gpus else ()
        return choose(config, (first, second), sleepable, devices, self.settings.ray is not None, room)

    def stop(self, level: Level, started: float, pairs: int) -> Stop | None:
        """After a sample: None to measure another, else why the search stops."""
        config, sides, rule = level.item.config, level.sides, level.rule
        if rule.fixed:
            return DECIDED if pairs >= config.boots * config.rounds else None
        halves = [side.round_figures(config.criteria.goodput) for side in sides]
        if rule.settled(halves[0], halves[1]) and pairs >= config.budget.min_pairs:
            return DECIDED
        what = (
            "the recording ended before its mean ratio to the canary was precise to a fifth of the tolerance,"
            if rule.recording
            else "the search ended undecided"
        )
        if pairs >= config.budget.max_pairs:
            return Stop(f"{what} at max_pairs={config.budget.max_pairs}")
        if (
            not rule.recording
            and pairs >= config.budget.min_pairs
            and len(samples(halves[0], halves[1]).samples) >= LAST_LOOK
        ):
            return Stop(f"{what} at its last look, sample {LAST_LOOK} (gate/looks.py: none decides past it)")
        if time.monotonic() - started >= config.budget.max_seconds:
            return Stop(f"{what} at its time budget, max_seconds={config.budget.max_seconds:g} (after {pairs} pairs)")
        return None

    def _boot_pairs(self, level: Level, say: Callable[[str], None] | None) -> Played:
        """One side up at a time (they share GPUs, or run through generators or Ray): a boot a side per pair, A B, B A,
        ..."""
        item, sides, progress = level.item, level.sides, level.progress
        config = item.config
        started = time.monotonic()
        for index, boot in boot_order(config.budget.max_pairs, 2):
            side = sides[index]
            problem = self._boot(item, side, boot, True, progress(side))
            if problem or (side.rounds and side.rounds[-1].aborted):
                return Played(problem, index)
            if index == (1 if boot % 2 == 0 else 0):  # the pair is complete
                ended = self.stop(level, started, boot + 1)
                if ended is not None:
                    return Played(undecided=ended.undecided)
                if say is not None:
                    say(f"  {item.nodeid.rsplit('::', 1)[-1]}: pair of boots {boot + 1} done, undecided")
        return Played()

    def _boot(
        self, item: PlannedItem, side: Side, boot: int, fresh: bool, on_round: Callable[[RoundRecord], None]
    ) -> str | None:
        """One boot of one side: its servers (here, or on the Ray cluster), warm-up and rounds; what died, if
        anything."""
        config, workload, load = item.config, side.workload, side.load
        on = stage(config, side.spec, load, self.pool, self._ray(), self.settings.telemetry, self.players, fresh)
        fit = side.booted(config, on.info, on.endpoints[0])
        planner = RoundPlanner(workload, load, config.prompt_base, side.prompts, len(on.endpoints), fit)
        figures = on.play(workload, load, planner, boot, side.rounds, on_round)
        side.memory += [figures] if figures is not None else []
        side.nodes += on.nodes()
        return on.crash_report()


def boot_order(boots: int, sides: int) -> list[tuple[int, int]]:
    """(side, boot index) in boot order; pairs alternate A B, B A, so a runner that drifts cannot favour one side."""
    if sides == 1:
        return [(0, boot) for boot in range(boots)]
    return [(side, boot) for boot in range(boots) for side in first_then_second(boot)]
