"""Figures per worker of a process-level swarm and per Ray node: where the tail that an item's medians hide shows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from .distribution import Distribution


@dataclass(frozen=True)
class WorkerFigures:
    """One worker (one server) of a process-level swarm: the tail that medians hide shows here."""

    worker: int
    requests: int
    failures: int
    per_request_tps: Distribution
    ttft: Distribution
    failure_causes: dict[str, int] = field(default_factory=dict)
    node: str | None = None
    """The Ray node(s) its requests were sent from (--swarm-ray: the node of its server and generator); None locally."""


@dataclass(frozen=True)
class NodeFigures:
    """One Ray node of a --swarm-ray item: its workers, its clock against the driver's, the memory of its servers."""

    node: str
    address: str
    workers: tuple[int, ...]
    clock_offset_s: float
    """What the round trips measured: node clock minus the driver's (0 within the round trip on the driver's host)."""
    clock_bound_s: float
    """How far the offset applied to its records may be off: 0 where the node reads the driver's clock."""
    shared_clock: bool
    rss_peak_mib: float | None = None
    pss_peak_mib: float | None = None
    gpu_note: str | None = None


def nodes_over_boots(per_boot: Sequence[Sequence[NodeFigures]]) -> tuple[NodeFigures, ...]:
    """A row per node over an item's boots, by name: the last boot's placement and clock, the worst clock bound, the
    highest peaks."""
    merged: dict[str, NodeFigures] = {}

    def peak(a: float | None, b: float | None) -> float | None:
        return b if a is None else a if b is None else max(a, b)

    for rows in per_boot:
        for row in rows:
            before = merged.get(row.node)
            merged[row.node] = (
                row
                if before is None
                else replace(
                    row,
                    clock_bound_s=max(before.clock_bound_s, row.clock_bound_s),
                    rss_peak_mib=peak(before.rss_peak_mib, row.rss_peak_mib),
                    pss_peak_mib=peak(before.pss_peak_mib, row.pss_peak_mib),
                )
            )
    return tuple(merged[node] for node in sorted(merged))
