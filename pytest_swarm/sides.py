"""One server spec's share of an item's measuring, as the search plays it: what the session records it from."""

from __future__ import annotations

from .figures.workers import NodeFigures
from .load.prompts import ColdPrompts
from .records import RoundRecord, ServerInfo
from .specs import Load, ServerSpec, Workload
from .telemetry.memory import MemoryFigures


class Side:
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
