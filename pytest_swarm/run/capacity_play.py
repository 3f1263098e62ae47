"""A capacity item's search played on a pool: each level measured until its verdict is decided. The search itself is
gate/capacity.py's."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ..core.records import RoundRecord
from ..engines.pool import Servers
from ..figures.summary import RoundFigures, round_figures
from ..figures.workers import NodeFigures
from ..gate.capacity import CapacityFound, CapacitySearch, Step, condition_verdict
from ..gate.statistics import Verdict
from ..load.planner import RoundPlanner
from ..settings import PluginSettings
from ..specs import CapacityRange, Load, PlannedItem
from ..telemetry.memory import MemoryFigures, peak_memory
from .players import REAL_PLAYERS, Players
from .sides import Side
from .stage import Stage, stage

if TYPE_CHECKING:
    from ..load.ray.backend import RayBackend


STEP_ROUNDS = 12
"""The most rounds a capacity step plays before it is left undecided: a level on the limit would take the whole
budget."""


class CapacityPlay:
    """One side's capacity search, reusing a boot across levels where it can; by workers, only the difference is
    booted or stopped."""

    def __init__(
        self,
        settings: PluginSettings,
        item: PlannedItem,
        wanted: CapacityRange,
        side: Side,
        pool: Servers,
        cluster: RayBackend | None,
        required: float | None = None,
        players: Players = REAL_PLAYERS,
    ) -> None:
        self.settings, self.item, self.side, self.pool, self.cluster = settings, item, side, pool, cluster
        self.wanted = wanted
        """The range searched (`capacity=`)."""
        self.players = players
        self.required = required
        """The level a stored capacity claims (CapacitySearch.required): measured where the search leaves it open."""
        self.steps: dict[float, list[RoundRecord]] = {}
        """Each level's rounds, in the order measured: the item's figures are its capacity level's."""
        self.memory: dict[float, list[MemoryFigures]] = {}
        """Each level's memory, sampled over its rounds: the item's is its capacity level's (a workers search's
        higher levels run more servers)."""
        self.nodes: dict[float, list[tuple[NodeFigures, ...]]] = {}
        """Each level's rows per Ray node (--swarm-ray): the item's are its capacity level's."""

    def play(
        self, on_round: Callable[[float], Callable[[RoundRecord], None]], started: float
    ) -> tuple[str | None, CapacityFound]:
        """The search to its end or its budget; what died, and what it found. `on_round(level)` hears each level's
        rounds."""
        config, wanted = self.item.config, self.wanted
        search = CapacitySearch(wanted.low, wanted.high, wanted.whole, required=self.required)
        booted: Sequence[object] = ()
        boot, ended = -1, None
        while (level := search.next_level()) is not None:
            if time.monotonic() - started >= config.budget.max_seconds:
                budget = config.budget.max_seconds
                ended = f"the search stopped at its time budget, max_seconds={budget:g}, before it converged"
                break
            load = replace(config.load(level), rounds=1)
            on = stage(
                config,
                self.side.spec,
                load,
                self.pool,
                self.cluster,
                self.settings.telemetry,
                self.players,
                fresh=False,
                resize=True,
            )
            fresh = any(all(s is not b for b in booted) for s in on.servers)  # a server new to the search
            booted, boot = on.servers, boot + (1 if fresh else 0)
            self.side.booted(config, on.info, on.endpoints[0])
            step, crashed, aborted = self._step(level, load, on, boot, fresh, on_round(level), started)
            search.record(step)
            if crashed is not None or aborted is not None:
                return crashed, self._found(search, f"the search stopped at {level:g}: {crashed or aborted}")
        return None, self._found(search, ended)

    def _step(
        self,
        level: float,
        load: Load,
        on: Stage,
        boot: int,
        fresh: bool,
        on_round: Callable[[RoundRecord], None],
        started: float,
    ) -> tuple[Step, str | None, str | None]:
        """One level: rounds until decided, STEP_ROUNDS, or the budget's end. A failed request breaks the condition
        outright."""
        config, side = self.item.config, self.side
        planner = RoundPlanner(side.workload, load, config.prompt_base, side.prompts, len(on.endpoints), side.fit)
        rounds = self.steps.setdefault(level, [])
        verdict, why = Verdict.INCONCLUSIVE, None
        figures: list[RoundFigures] = []
        for index in range(STEP_ROUNDS):
            warm = replace(load, warmup=load.warmup and fresh and index == 0)
            memory = on.play(side.workload, warm, planner, boot, rounds, on_round)
            self.memory.setdefault(level, []).extend([memory] if memory is not None else [])
            self.nodes[level] = on.nodes()
            problem = on.crash_report()
            figures.append(round_figures(rounds[-1], config.criteria.goodput))
            if problem is not None or rounds[-1].aborted:
                step = self._step_of(level, Verdict.INCONCLUSIVE, figures, "the server died or the guard stopped it")
                return step, problem, rounds[-1].aborted
            if any(f.failures for f in figures):
                return self._step_of(level, Verdict.FAIL, figures, None), None, None
            values = {name: [f.figures.get(name) or 0.0 for f in figures] for name, _ in config.criteria.interactive}
            verdict = condition_verdict(values, config.criteria.interactive, self.settings.gate.alpha)
            if verdict is not Verdict.INCONCLUSIVE:
                break
            if time.monotonic() - started >= config.budget.max_seconds:
                why = "the time budget ended during it"
                break
        else:
            why = f"undecided after {STEP_ROUNDS} rounds: its figures sit near the condition's limits"
        return self._step_of(level, verdict, figures, why), None, None

    def _step_of(self, level: float, verdict: Verdict, figures: list[RoundFigures], why: str | None) -> Step:
        medians = tuple(
            (
                name,
                statistics.median(v) if (v := [x for f in figures if (x := f.figures.get(name)) is not None]) else None,
            )
            for name, _ in self.item.config.criteria.interactive
        )
        failures = sum(f.failures for f in figures)
        memory = peak_memory(self.memory.get(level, []))
        return Step(
            level,
            verdict,
            len(figures),
            sum(f.requests for f in figures),
            failures,
            medians,
            why if failures == 0 else f"{failures} request(s) failed: a level with failures is not carried",
            memory.rss_peak_mib if memory is not None else None,
            tuple(f.clock for f in figures if f.clock is not None),
            tuple(f.clock_ttft for f in figures if f.clock_ttft is not None),
        )

    def _found(self, search: CapacitySearch, ended: str | None) -> CapacityFound:
        """The search's result; the side keeps the rounds of its capacity level (else of its first): the item's
        figures."""
        wanted = self.wanted
        shown = search.capacity
        if shown is None and search.steps:
            shown = search.steps[0].level
        if shown is not None:
            self.side.rounds[:] = self.steps.get(shown, [])
            self.side.memory[:] = self.memory.get(shown, [])
            self.side.nodes[:] = self.nodes.get(shown, [])
            self.side.load = replace(self.item.config.load(shown), rounds=len(self.side.rounds))
        return CapacityFound(wanted.what, wanted.low, wanted.high, tuple(search.steps), ended)
