"""A flag search: the smallest set of two specs' differences that carries the change, found by paired A/Bs.

Delta debugging (Zeller and Hildebrandt's ddmin): the session asks `next_probe()` for a subset of the differences to
apply to the first spec, measures that spec against the first, and tells `record()` what it found. All of them first,
so specs whose claims do not differ say so at once; then the set known to carry the change is split into ever smaller
parts, keeping a part (or the rest without a part) that still carries it. The answer is 1-minimal: take away any one
difference and the change is gone. A step that ends undecided is measured once more with a larger budget; undecided
again, it counts as not shown to carry the change, and the answer says so."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .bisection import Finding


@dataclass(frozen=True)
class FlagProbe:
    """The next step: the differences to apply to the first spec, and whether this is its one retry."""

    applied: tuple[int, ...]
    retry: bool


@dataclass(frozen=True)
class FlagStep:
    """One measured step: the set the change was known to lie in, the differences applied, what the A/B found."""

    carrying: tuple[int, ...]
    applied: tuple[int, ...]
    finding: Finding
    retry: bool


def _parts(items: tuple[int, ...], count: int) -> list[tuple[int, ...]]:
    """`items` in `count` runs of near-equal length, in order."""
    size, extra = divmod(len(items), count)
    parts, start = [], 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        parts.append(items[start:end])
        start = end
    return parts


@dataclass(frozen=True)
class FlagSearch:
    """The search over `count` differences (indices 0 to count - 1)."""

    count: int
    carrying: tuple[int, ...] = ()
    """The smallest set shown to carry the change so far (all of them once the first step has shown they do)."""
    granularity: int = 2
    steps: tuple[FlagStep, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError("a flag search needs two specs that differ in at least one flag")

    def _candidates(self) -> list[tuple[int, ...]]:
        """The subsets to try at this granularity: each part, then (from three parts up) each part's complement."""
        parts = _parts(self.carrying, self.granularity)
        rest = [tuple(i for i in self.carrying if i not in part) for part in parts] if self.granularity > 2 else []
        return parts + rest

    def _tried_here(self) -> set[tuple[int, ...]]:
        """The subsets decided since the set or the granularity last changed (a retry's first try included)."""
        found: set[tuple[int, ...]] = set()
        for step in reversed(self.steps):
            if step.carrying != self.carrying or step.applied == self.carrying:
                break
            if step.finding is not Finding.UNDECIDED or step.retry:
                found.add(step.applied)
        return found

    def next_probe(self) -> FlagProbe | None:
        """The step to take now; None once the answer is 1-minimal, or the first step found no change."""
        last = self.steps[-1] if self.steps else None
        if last is not None and last.finding is Finding.UNDECIDED and not last.retry:
            return FlagProbe(last.applied, retry=True)
        if not self.carrying:
            if last is None:
                return FlagProbe(tuple(range(self.count)), retry=False)
            return None  # the first step: no change, or undecided twice
        if len(self.carrying) == 1:
            return None
        tried = self._tried_here()
        untried = [subset for subset in self._candidates() if subset not in tried]
        return FlagProbe(untried[0], retry=False) if untried else None

    def record(self, probe: FlagProbe, finding: Finding) -> FlagSearch:
        """The search after `probe`'s A/B found `finding`: a part that carries the change is split in two again; a
        complement that does is split one part coarser; with none, the parts get twice as fine."""
        moved = replace(self, steps=(*self.steps, FlagStep(self.carrying, probe.applied, finding, probe.retry)))
        if finding is Finding.DIFFERS:
            if not self.carrying:  # the first step: all of them carry it
                return replace(moved, carrying=probe.applied, granularity=2)
            part = probe.applied in _parts(self.carrying, self.granularity)
            return replace(moved, carrying=probe.applied, granularity=2 if part else max(self.granularity - 1, 2))
        while moved.carrying and moved.next_probe() is None and moved.granularity < len(moved.carrying):
            moved = replace(moved, granularity=min(2 * moved.granularity, len(moved.carrying)))
        return moved

    @property
    def minimal(self) -> tuple[int, ...] | None:
        """The differences that carry the change, once the search has ended on them; None before, or with none."""
        return self.carrying if self.carrying and self.next_probe() is None else None

    @property
    def no_change(self) -> bool:
        """The first step showed every difference applied at once the same as the first spec."""
        return bool(self.steps) and self.steps[0].finding is Finding.SAME and not self.carrying

    @property
    def unresolved(self) -> tuple[tuple[int, ...], ...]:
        """The subsets left undecided twice: the answer is 1-minimal as far as these allow."""
        return tuple(s.applied for s in self.steps if s.retry and s.finding is Finding.UNDECIDED)
