"""One figure's history as the reports draw it, with its change points, so the reports stay free of SQL and drivers."""

from __future__ import annotations

from dataclasses import dataclass

from ..figures.registry import direction_of
from .changepoints import ChangePoint, change_points


@dataclass(frozen=True)
class TrendPoint:
    """One stored run's value of a figure, with the commit and engine version it was measured on."""

    run_id: str
    started_at: str
    git_commit: str | None
    engine_version: str | None
    value: float
    verdict: str | None = None


@dataclass(frozen=True)
class Trend:
    """A figure's history for one item on one hardware profile, with the change points found in it."""

    nodeid: str
    hardware: str
    figure: str
    points: tuple[TrendPoint, ...]
    changes: tuple[ChangePoint, ...]

    @classmethod
    def of(cls, nodeid: str, hardware: str, figure: str, points: list[TrendPoint]) -> Trend:
        return cls(
            nodeid,
            hardware,
            figure,
            tuple(points),
            tuple(change_points([p.value for p in points], direction_of(figure))),
        )

    def describe(self, change: ChangePoint) -> str:
        """`effective_tps x0.900 (worse): 100 -> 90 from run 2026-11-22T10:00 (commit abc1234)`."""
        point = self.points[change.index]
        commit = f", commit {point.git_commit[:10]}" if point.git_commit else ""
        return f"{self.figure} {change.describe()} from the run of {point.started_at[:16]}{commit}"
