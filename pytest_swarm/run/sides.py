"""One server spec's share of an item's measuring, as the search plays it: what the session records it from."""

from __future__ import annotations

from collections.abc import Sequence

from ..client import Endpoint
from ..core.limits import Limit
from ..core.records import RoundRecord, ServerInfo
from ..figures.summary import RoundFigures, round_figures
from ..figures.workers import NodeFigures
from ..load.prompt_fit import PromptFit, fit_prompts
from ..load.prompts import ColdPrompts
from ..load.trace_fit import refuse_unfit
from ..specs import Load, MarkerConfig, ServerSpec, Workload
from ..telemetry.memory import MemoryFigures


class Side:
    """One server spec's share of an item's measuring. A canary side plays the canary's own workload. `role`: "",
    "candidate", "reference" or "canary"."""

    def __init__(self, spec: ServerSpec, workload: Workload, load: Load, role: str = "") -> None:
        self.spec = spec
        self.workload = workload
        self.load = load
        self.role = role
        self.prompts = ColdPrompts()
        """The side's own prompt counter: both sides of an A/B item cycle through the same base prompts in step."""
        self.rounds: list[RoundRecord] = []
        self.memory: list[MemoryFigures] = []
        self.nodes: list[tuple[NodeFigures, ...]] = []
        """Per boot, a row per Ray node (--swarm-ray)."""
        self.info: ServerInfo = {}
        self.fit: PromptFit | None = None
        """The prompts fitted to this side's server (load/prompt_fit.py) at its first boot: later boots of the spec
        count the same tokens."""
        self._figured: list[tuple[RoundRecord, Sequence[tuple[str, Limit]], RoundFigures]] = []

    def booted(self, config: MarkerConfig, info: ServerInfo, endpoint: Endpoint) -> PromptFit:
        """What a boot of this side's servers said of itself, kept; the prompts fitted to it (refused before any round
        when one cannot fit)."""
        self.info = info.copy()
        if self.fit is None:
            self.fit = fit_prompts(config, self.workload, self.spec.label, self.info, endpoint)
        else:
            refuse_unfit(config.trace, self.spec.label, self.info)
        return self.fit

    def round_figures(self, goodput: Sequence[tuple[str, Limit]]) -> list[RoundFigures]:
        """Each round's figures, each computed once: a search asks for all of them after every pair."""
        kept = self._figured
        for index, round_ in enumerate(self.rounds):
            if index == len(kept) or kept[index][0] is not round_ or kept[index][1] != goodput:
                del kept[index:]
                kept.append((round_, goodput, round_figures(round_, goodput)))
        del kept[len(self.rounds) :]
        return [figures for _, _, figures in kept]
