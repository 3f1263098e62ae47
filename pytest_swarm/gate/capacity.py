"""Capacity: the largest level at which a condition still holds, found by growing then bisecting. Pure: the session
asks `next_level()` and tells `record()`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..core.limits import Limit
from ..figures.components import RoundClock
from .entries import TestBaseline
from .notes import CapacityEnded, CapacityUnbounded, CapacityUndecided, Note
from .sequential import running_interval
from .statistics import Comparison, Verdict

NOTHING = 1e-9
"""What a round's figure of 0 counts as on the log scale the condition is decided on."""


@dataclass(frozen=True)
class Step:
    """One level the search measured, its verdict (PASS, FAIL or undecided), and what the table shows of it."""

    level: float
    verdict: Verdict
    rounds: int = 0
    requests: int = 0
    failures: int = 0
    figures: tuple[tuple[str, float | None], ...] = ()
    why: str | None = None
    rss_peak_mib: float | None = None
    """The servers' peak RSS over its rounds: seed 001 asks for the daemons' own memory as their number grows; None
    where it was not sampled (a remote server)."""
    clocks: tuple[RoundClock, ...] = ()
    """Its rounds' server clocks (figures/components.py), of the whole request: what splits a capacity comparison's
    change at this level (gate/where.py)."""
    clocks_ttft: tuple[RoundClock, ...] = ()


@dataclass(frozen=True)
class CapacityFound:
    """A side's search as it ended: what and over which range, every step, and the capacity (None: held nowhere;
    `bounded`: a level above it did not hold)."""

    what: str
    low: float
    high: float
    steps: tuple[Step, ...]
    ended: str | None = None
    """Why the search stopped before it converged (its time budget); None when it converged."""

    @property
    def whole(self) -> bool:
        return self.what != "rate"

    @property
    def capacity(self) -> float | None:
        """The largest level where the condition was shown to hold; None where it held at none."""
        return max((s.level for s in self.steps if s.verdict is Verdict.PASS), default=None)

    @property
    def bounded(self) -> bool:
        """Whether a level was not shown to hold (failed or undecided): the capacity is below it, not merely at least
        the range."""
        return any(s.verdict is not Verdict.PASS for s in self.steps)

    def failed_at(self) -> float | None:
        """The smallest level where the condition was shown not to hold (a decided FAIL); None if none was."""
        return min((s.level for s in self.steps if s.verdict is Verdict.FAIL), default=None)


class CapacitySearch:
    """The search over [low, high]: grow by `factor` while the condition holds, then bisect. `whole`: levels are
    counts."""

    def __init__(
        self,
        low: float,
        high: float,
        whole: bool,
        factor: float = 2.0,
        precision: float = 0.1,
        required: float | None = None,
    ) -> None:
        if not 0 < low <= high:
            raise ValueError(f"a capacity range needs 0 < low <= high, got ({low}, {high})")
        if factor <= 1 or precision <= 0:
            raise ValueError(f"the search needs factor > 1 and precision > 0, got {factor} and {precision}")
        self.low, self.high, self.whole = low, high, whole
        self.factor, self.precision = factor, precision
        self.steps: list[Step] = []
        self._held: float | None = None
        """The largest level shown to hold so far."""
        self._failed: float | None = None
        """The smallest level that did not hold (or stayed undecided) so far."""
        self.required = required
        """`required_level`: the level a stored capacity claims; where the search leaves it undecided, that level is
        measured itself."""

    def record(self, step: Step) -> None:
        """What the measurement at `step.level` found; anything but PASS counts as not holding."""
        self.steps.append(step)
        level, verdict = step.level, step.verdict
        if verdict is Verdict.PASS:
            self._held = level if self._held is None else max(self._held, level)
        else:
            self._failed = level if self._failed is None else min(self._failed, level)

    def next_level(self) -> float | None:
        """The level to measure next; None when the search is done."""
        level = self._searched()
        if level is not None or self.required is None:
            return level
        held, failed = self._held, min((s.level for s in self.steps if s.verdict is Verdict.FAIL), default=None)
        deciding = self._round(min(self.required, self.high), up=False, above=0.0)
        if claim_verdict(held, failed, self.required) is not Verdict.INCONCLUSIVE or not self.low <= deciding:
            return None
        return None if any(s.level == deciding for s in self.steps) else deciding

    def _searched(self) -> float | None:
        """The search's own next level: grown while the condition holds, then bisected; None when it converged."""
        if not self.steps:
            return self.low
        if self._held is None:
            return None  # the low end itself did not hold: no capacity in the range
        if self._failed is None:
            if self._held >= self.high:
                return None  # held at the high end: the capacity is at least the range
            grown = min(self._held * self.factor, self.high)
            return self._round(grown, up=True, above=self._held)
        if self._closed(self._held, self._failed):
            return None
        middle = math.sqrt(self._held * self._failed) if not self.whole else (self._held + self._failed) / 2
        return self._round(middle, up=False, above=self._held)

    @property
    def capacity(self) -> float | None:
        """The largest level at which the condition was shown to hold; None if it held nowhere measured."""
        return self._held

    @property
    def bounded(self) -> bool:
        """Whether the capacity is below the range's high end (a level above it failed), not merely at least it."""
        return self._failed is not None

    def _closed(self, held: float, failed: float) -> bool:
        return failed - held <= 1 if self.whole else failed / held - 1 <= self.precision

    def _round(self, level: float, up: bool, above: float) -> float:
        """A whole level strictly above `above` for counts (the search must move); rates as they are."""
        if not self.whole:
            return level
        rounded = math.ceil(level) if up else math.floor(level)
        return float(max(rounded, int(above) + 1))


def condition_verdict(
    rounds: Mapping[str, Sequence[float]], condition: Sequence[tuple[str, Limit]], alpha: float
) -> Verdict:
    """Whether a level meets the condition: PASS when every limit holds with confidence, FAIL when one is broken,
    else INCONCLUSIVE."""
    each = alpha / max(len(condition), 1)
    verdicts = []
    for figure, limit in condition:
        # A round with nothing served (0 tok/s) is the strongest evidence against a "> limit", not a missing value.
        values = [math.log(max(v, NOTHING)) for v in rounds.get(figure, ())]
        low, high = (math.exp(end) if math.isfinite(end) else end for end in running_interval(values, each))
        if limit.op in ("<", "<="):
            verdicts.append(
                Verdict.PASS if limit.holds(high) else Verdict.FAIL if not limit.holds(low) else Verdict.INCONCLUSIVE
            )
        else:
            verdicts.append(
                Verdict.PASS if limit.holds(low) else Verdict.FAIL if not limit.holds(high) else Verdict.INCONCLUSIVE
            )
    if Verdict.FAIL in verdicts:
        return Verdict.FAIL
    return Verdict.PASS if verdicts and all(v is Verdict.PASS for v in verdicts) else Verdict.INCONCLUSIVE


def required_level(baseline: float, tolerance: float, whole: bool) -> float:
    """The level a server must still carry to be within `tolerance` of `baseline`; for counts, rounded up to a whole
    one."""
    floor = baseline * (1.0 - tolerance)
    return float(math.ceil(floor - 1e-9)) if whole else floor


def stored_capacity(entry: TestBaseline | None, tolerance: float) -> tuple[float, float] | None:
    """The capacity an entry recorded and the tolerance it is checked within (the entry's own, else `tolerance`); None
    where the entry has none."""
    recorded = entry.figures.get("capacity") if entry is not None else None
    if recorded is None or not recorded.samples:
        return None
    return recorded.samples[0], recorded.tolerance if recorded.tolerance is not None else tolerance


def claim_verdict(held: float | None, failed: float | None, required: float) -> Verdict:
    """Whether a server still carries `required`: PASS when a level at or above it held, FAIL when one at or below it
    failed (`failed`: the smallest), else undecided."""
    if held is not None and held >= required:
        return Verdict.PASS
    return Verdict.FAIL if failed is not None and failed <= required else Verdict.INCONCLUSIVE


def capacity_comparison(
    found: CapacityFound, baseline: float, tolerance: float, alpha: float, against: str = "baseline"
) -> Comparison:
    """The capacity claim: does the server still carry `required_level` of `baseline`? `lower` and `upper` bound the
    ratio."""
    required = required_level(baseline, tolerance, found.whole)
    held, failed = found.capacity, found.failed_at()
    verdict = claim_verdict(held, failed, required)
    measured = held if held is not None else 0.0
    return Comparison(
        figure="capacity",
        direction="higher",
        baseline=baseline,
        measured=measured,
        ratio=measured / baseline,
        lower=(held or 0.0) / baseline,
        upper=math.inf if failed is None else failed / baseline,
        alpha=alpha,
        tolerance=tolerance,
        p_value=math.nan,
        verdict=verdict,
        one_boot=False,
        threshold=required / baseline,
        pass_alpha=alpha,
        stored=against == "baseline",
    )


def capacity_notes(found: CapacityFound, side: str = "") -> list[Note]:
    """What the reports must say beside the capacity: where it could not be bounded, and why a search stopped early;
    `side` names an A/B side."""
    notes: list[Note] = []
    if found.capacity is None:
        notes.append(CapacityUnbounded(side, found.low, held_at_none=True))
    elif not found.bounded:
        notes.append(CapacityUnbounded(side, found.high, held_at_none=False))
    undecided = [s for s in found.steps if s.verdict is Verdict.INCONCLUSIVE]
    if undecided:
        notes.append(CapacityUndecided(side, tuple(s.level for s in undecided), undecided[0].why))
    if found.ended is not None:
        notes.append(CapacityEnded(side, found.ended))
    return notes
