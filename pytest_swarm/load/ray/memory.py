"""Memory per node: each node samples its own server tree, and the driver adds the nodes up (GPU memory once a host)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...telemetry.memory import Guard, MemoryFigures

POLL_S = 0.5
"""How often the driver asks the nodes for a guard breach: a round-trip each, cheap, and quick enough to stop a
run-away."""
CALL_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class NodeMemoryFigures:
    """One node's figures, with the host it runs on (its boot id), so GPU memory is counted once per host."""

    node: str
    host: str | None
    figures: MemoryFigures


def combine(per_node: Sequence[NodeMemoryFigures]) -> MemoryFigures:
    """The swarm's memory over its nodes: server-tree figures summed, GPU figures summed once per host (pure)."""

    def total(values: list[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return sum(present) if present else None

    one_per_host = list({(n.host or n.node): n.figures for n in per_node}.values())
    figures = [n.figures for n in per_node]
    return MemoryFigures(
        rss_peak_mib=total([f.rss_peak_mib for f in figures]),
        rss_mean_mib=total([f.rss_mean_mib for f in figures]),
        pss_peak_mib=total([f.pss_peak_mib for f in figures]),
        pss_mean_mib=total([f.pss_mean_mib for f in figures]),
        gpu_mem_peak_mib=total([f.gpu_mem_peak_mib for f in one_per_host]),
        gpu_util_peak_pct=max((f.gpu_util_peak_pct for f in figures if f.gpu_util_peak_pct is not None), default=None),
        gpu_power_peak_w=total([f.gpu_power_peak_w for f in one_per_host]),
        gpu_note=next((f.gpu_note for f in figures if f.gpu_note), None),
        samples=sum(f.samples for f in figures),
    )


class NodeMemory:
    """Every node's sampler of an item, driven as one: what rounds.py needs of a memory watch."""

    def __init__(self, actors: Sequence[tuple[Any, str, str | None]], interval_s: float, guard: Guard) -> None:
        self._actors = list(actors)
        self._interval_s = interval_s
        self._guard = guard
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="pytest-swarm-ray-memory", daemon=True)
        self.on_breach: Callable[[str], None] | None = None
        self.breached: str | None = None
        self.per_node: list[NodeMemoryFigures] = []

    def start(self) -> None:
        import ray

        ray.get(
            [actor.start_memory.remote(self._interval_s, self._guard) for actor, _, _ in self._actors],
            timeout=CALL_TIMEOUT_S,
        )
        self._thread.start()

    def _watch(self) -> None:
        import ray

        while not self._stop.wait(POLL_S):
            for actor, node, _ in self._actors:
                try:
                    breach = ray.get(actor.memory_breach.remote(), timeout=CALL_TIMEOUT_S)
                except ray.exceptions.RayError:
                    continue  # a lost node is reported by the round and the crash report, not as a breach
                if breach and self.breached is None:
                    self.breached = f"on Ray node {node}: {breach}"
                    if self.on_breach is not None:
                        self.on_breach(self.breached)

    def stop(self) -> None:
        """Stop every node's sampler and keep its figures; a node that is gone has none."""
        import ray

        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        for actor, node, host in self._actors:
            try:
                figures = ray.get(actor.stop_memory.remote(), timeout=CALL_TIMEOUT_S)
            except ray.exceptions.RayError:
                continue
            if figures is not None:
                self.per_node.append(NodeMemoryFigures(node, host, figures))

    def figures(self) -> MemoryFigures:
        return combine(self.per_node)
