"""An item's verdict: its figures against its baseline entry and its hard limits.

Also the reverse direction: turning a result into the baseline entry that
`--swarm-update-baselines` records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import fmean
from typing import Any, Protocol

from ..figures.limits import Limit
from ..figures.names import direction_of
from ..figures.summary import SwarmResult
from ..settings import GateSettings
from .baselines import FigureBaseline, TestBaseline
from .statistics import Comparison, LogSample, Verdict, compare_all, log_samples

NO_BASELINE_NOTE = "no baseline for this test on this hardware: record one with --swarm-update-baselines"
BUSY_HOST_CORES = 0.25
"""Other processes' average CPU above which a FAIL is flagged as possibly caused by the host."""


class GatePolicy(Protocol):
    """What an item asks of the gate (its marker's gate=, tolerance= and slo=): the marker's config is one."""

    @property
    def gate(self) -> tuple[str, ...]: ...

    @property
    def tolerance(self) -> float: ...

    @property
    def slo(self) -> tuple[tuple[str, Limit], ...]: ...


@dataclass(frozen=True)
class GateOutcome:
    verdict: Verdict
    comparisons: tuple[Comparison, ...]
    broken_limits: tuple[str, ...]
    notes: tuple[str, ...]

    def fails(self, strict: bool) -> bool:
        """FAIL always fails; INCONCLUSIVE and NO_BASELINE only under --swarm-strict."""
        return self.verdict is Verdict.FAIL or (strict and self.verdict in (Verdict.INCONCLUSIVE, Verdict.NO_BASELINE))

    def message(self, nodeid: str) -> str:
        lines = [f"{nodeid}: swarm gate {self.verdict.value.upper()}"]
        lines += [f"  hard limit broken: {b}" for b in self.broken_limits]
        for c in self.comparisons:
            sense = "higher is better" if c.direction == "higher" else "lower is better"
            lines.append(
                f"  {c.figure} ({sense}): baseline {c.baseline:.4g}, measured {c.measured:.4g}, "
                f"ratio {c.ratio:.3f} (one-sided bound {c.upper:.3f} at alpha {c.alpha:.3g}), "
                f"tolerance {c.tolerance:.0%}: {c.verdict.value.upper()}"
            )
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def _limits(config: GatePolicy, baseline: TestBaseline | None) -> list[tuple[str, Limit]]:
    limits = list(config.slo)
    if baseline is not None:
        for name, figure in baseline.figures.items():
            if figure.min is not None:
                limits.append((name, Limit(">=", figure.min)))
            if figure.max is not None:
                limits.append((name, Limit("<=", figure.max)))
    return limits


def evaluate(result: SwarmResult, config: GatePolicy, baseline: TestBaseline | None, settings: GateSettings) -> GateOutcome:
    scalars = result.scalars()
    broken = tuple(
        f"{name} = {'none' if scalars.get(name) is None else format(scalars[name], '.4g')}, limit {limit}"
        for name, limit in _limits(config, baseline)
        if not limit.holds(scalars.get(name))
    ) + ((result.aborted,) if result.aborted else ())
    notes: list[str] = []
    comparisons: list[Comparison] = []
    if baseline is None:
        notes.append(NO_BASELINE_NOTE)
    else:
        samples: dict[str, tuple[str, LogSample, LogSample, float]] = {}
        for figure in config.gate:
            recorded = baseline.figures.get(figure)
            current = log_samples(result.per_boot(figure))
            if recorded is None:
                notes.append(f"{figure}: gated but not in the baseline")
            elif current.n == 0:
                notes.append(f"{figure}: no measured value to compare (all requests failed?)")
            else:
                tolerance = recorded.tolerance if recorded.tolerance is not None else config.tolerance
                samples[figure] = (recorded.direction, current, recorded.log_sample(), tolerance)
        comparisons = compare_all(samples, settings.alpha, settings.cv_floor) if samples else []
        if any(c.one_boot for c in comparisons):
            notes.append(
                f"the verdict rests on one boot on at least one side (rounds as samples, spread floored at CV {settings.cv_floor:.0%}); "
                "boots=4 gives independent samples"
            )
        improved = [c.figure for c in comparisons if c.improved]
        if improved:
            notes.append(f"significantly better than the baseline ({', '.join(improved)}): consider re-baselining")
    verdicts = {c.verdict for c in comparisons}
    if broken or Verdict.FAIL in verdicts:
        verdict = Verdict.FAIL
        busy = [r.other_cpu_cores for r in result.rounds if r.other_cpu_cores is not None]
        if busy and fmean(busy) > BUSY_HOST_CORES:
            notes.append(
                f"other processes kept {fmean(busy):.2f} cores busy on average during the rounds: "
                "a busy host is the commonest false regression"
            )
    elif Verdict.INCONCLUSIVE in verdicts:
        verdict = Verdict.INCONCLUSIVE
    elif baseline is None or not comparisons:
        verdict = Verdict.NO_BASELINE
    else:
        verdict = Verdict.PASS
    return GateOutcome(verdict, tuple(comparisons), broken, tuple(notes))


def baseline_entry(result: SwarmResult, config: GatePolicy, server: dict[str, Any], recorded: dict[str, Any]) -> TestBaseline:
    """The entry for `result`: per gated figure, one geometric mean per boot (or the rounds of a lone boot)."""
    figures = {}
    for figure in config.gate:
        per_boot = result.per_boot(figure)
        if not per_boot:
            continue
        if len(per_boot) >= 2:
            samples = tuple(math.exp(fmean(math.log(v) for v in rounds)) for rounds in per_boot)
        else:
            samples = tuple(per_boot[0])
        figures[figure] = FigureBaseline(direction_of(figure), samples, per_boot=len(per_boot) >= 2)
    return TestBaseline(figures, server, recorded, result.boots, len(result.rounds) // max(result.boots, 1))
