"""A bisect: the first of an ordered list of servers whose claim differs from the first's, found by paired A/Bs.

Pure: the session asks `next_probe()` and tells `record()`. The last server is probed first, so a list whose ends do
not differ says so at once; then each step halves the range between the last server shown the same as the first (the
good end) and the first shown to differ (the changed end). A step that ends undecided is measured once more with a
larger budget; undecided again, the search stops and reports the range that is left rather than guess."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum

from .statistics import Verdict


class Finding(Enum):
    """What one step's A/B found of the probe against the good end."""

    SAME = "same"
    DIFFERS = "differs"
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class Probe:
    """The next step: the server to measure against the good end, and whether this is its one retry."""

    good: int
    probe: int
    retry: bool


@dataclass(frozen=True)
class BisectStep:
    """One measured step: the range it was taken in, the server probed, and what its A/B found."""

    good: int
    changed: int
    probe: int
    finding: Finding
    retry: bool


@dataclass(frozen=True)
class Bisection:
    """The search over `count` servers (indices 0 to count - 1; 0 is the known good)."""

    count: int
    good: int = 0
    changed: int | None = None
    """The first server shown to differ so far; None until the last one has been probed."""
    steps: tuple[BisectStep, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.count < 2:
            raise ValueError(f"a bisect needs at least two servers, got {self.count}")

    @property
    def upper(self) -> int:
        """The changed end as the search knows it: the last server until the first probe has spoken."""
        return self.count - 1 if self.changed is None else self.changed

    @property
    def ended(self) -> bool:
        return self.next_probe() is None

    def next_probe(self) -> Probe | None:
        """The step to take now; None once the search has its answer, found no change, or stopped undecided."""
        last = self.steps[-1] if self.steps else None
        if last is not None and last.finding is Finding.UNDECIDED:
            return None if last.retry else Probe(self.good, last.probe, retry=True)
        if last is not None and last.probe == self.count - 1 and last.finding is Finding.SAME:
            return None  # the ends do not differ: nothing to find
        if self.changed is None:
            return Probe(self.good, self.count - 1, retry=False)
        if self.changed - self.good <= 1:
            return None
        return Probe(self.good, (self.good + self.changed) // 2, retry=False)

    def record(self, probe: Probe, finding: Finding) -> Bisection:
        """The search after `probe`'s A/B found `finding`."""
        step = BisectStep(self.good, self.upper, probe.probe, finding, probe.retry)
        moved = replace(self, steps=(*self.steps, step))
        if finding is Finding.DIFFERS:
            return replace(moved, changed=probe.probe)
        if finding is Finding.SAME:
            return replace(moved, good=probe.probe)
        return moved

    @property
    def first_changed(self) -> int | None:
        """The index of the first server whose claim differs from the first's, once the search has pinned it."""
        if self.changed is not None and self.changed - self.good == 1:
            return self.changed
        return None

    @property
    def left(self) -> tuple[int, int] | None:
        """Where the search stopped undecided: the good end and the changed end between which the change lies."""
        if not self.ended or self.first_changed is not None or self.no_change:
            return None
        return (self.good, self.upper)

    @property
    def no_change(self) -> bool:
        """The last server was shown the same as the first: no change between the ends."""
        return any(s.probe == self.count - 1 and s.finding is Finding.SAME for s in self.steps)


def most_steps(count: int) -> int:
    """Steps a bisect of `count` servers takes at most when every step decides: the last probed, then halvings."""
    return 1 + math.ceil(math.log2(count - 1)) if count > 2 else 1


def finding_of(worse: Verdict, better: Verdict | None) -> Finding:
    """A step's finding from its A/B's claims: `worse` the gate's verdict on the probe against the first server,
    `better` the same claims read the other way round (None: only a worse claim is looked for). Either failing means
    the probe differs; both passing, that it does not."""
    if Verdict.FAIL in (worse, better):
        return Finding.DIFFERS
    if worse is Verdict.PASS and better in (None, Verdict.PASS):
        return Finding.SAME
    return Finding.UNDECIDED
