"""The split of a change: how much of an A/B's change of end-to-end time (or of TTFT) each component carried.

The same samples the gate decides on (gate/samples.py: one per boot of both sides, each the mean over its pairs of
rounds) give each component a change in seconds, candidate minus reference, and a paired t interval on those samples
(the gate's t bound, looks.radius), on differences rather than log ratios: components add up in seconds, and a
component can be zero on one side (no queue). The interval is the t interval where the search stopped, not the
search's running interval: the split explains a decision already taken, it does not take one. Each bound is at
alpha / (2 x components) (Bonferroni): an unchanged pair of servers names a component in at most alpha of its A/Bs,
and a component whose interval holds 0 is never named as a cause. Pure, like the rest of gate/.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from statistics import fmean, median, stdev
from typing import Any

from ..figures.components import COMPONENTS, RoundClock, Upto
from ..figures.summary import RoundFigures
from . import looks
from .samples import Samples
from .samples import samples as pair_samples

ALPHA = 0.01
"""The components' intervals together, two-sided: each bound at alpha / (2 x components)."""

PairClocks = tuple[Sequence[RoundClock], Sequence[RoundClock]]
"""One pair's rounds: the candidate's, then the reference's."""


@dataclass(frozen=True, slots=True)
class ComponentChange:
    """One component's change: seconds a request on each side, the change, its share of the span's change, its
    interval. `share` is None where the span did not change at all."""

    component: str
    reference_s: float
    candidate_s: float
    change_s: float
    share: float | None
    lower: float
    upper: float

    @property
    def moved(self) -> bool:
        """Its interval excludes 0: a change beyond the noise, in either direction."""
        return self.lower > 0.0 or self.upper < 0.0

    def to_dict(self) -> dict[str, Any]:
        """The JSON item's entry: `{component, reference_s, candidate_s, change_s, share, lower, upper}`; an
        unbounded interval (too few samples) is null."""
        return {
            "component": self.component,
            "reference_s": self.reference_s,
            "candidate_s": self.candidate_s,
            "change_s": self.change_s,
            "share": self.share,
            "lower": self.lower if math.isfinite(self.lower) else None,
            "upper": self.upper if math.isfinite(self.upper) else None,
        }


@dataclass(frozen=True, slots=True)
class StateChange:
    """One server state figure on both sides (the median over each side's rounds): waiting peak 0 -> 2."""

    name: str
    reference: float
    candidate: float


@dataclass(frozen=True, slots=True)
class WhereTimeWent:
    """Where an A/B's time went: each component's change, largest |change| first, with what moved beside it.

    `source` is whose clock the rounds used ("per request", "/metrics", "none", or both joined by " + ");
    `client_bound` and `contradictions` count (candidate, reference) rounds the client could not keep up and
    requests whose server timings contradicted the client's; `unread` says why a server's /metrics could not be read.
    """

    upto: str
    source: str
    samples: int
    span: ComponentChange | None
    changes: tuple[ComponentChange, ...]
    state: tuple[StateChange, ...] = ()
    client_bound: tuple[int, int] = (0, 0)
    rounds: tuple[int, int] = (0, 0)
    contradictions: tuple[int, int] = (0, 0)
    contradiction: str | None = None
    unread: str | None = None

    @property
    def moved(self) -> tuple[ComponentChange, ...]:
        """The components whose interval excludes 0, largest |change| first: the only ones ever named."""
        return tuple(c for c in self.changes if c.moved)

    def to_json(self) -> list[dict[str, Any]]:
        """`where_time_went` in a JSON item: every component, largest |change| first."""
        return [c.to_dict() for c in self.changes]


def _side_means(rounds: Sequence[RoundClock], names: Sequence[str]) -> dict[str, float] | None:
    """One half of a pair: each component's mean over its rounds (0 where a round lacks it), and the span's."""
    split = [r.split for r in rounds if r.split.span_s is not None and r.split.means]
    if not split:
        return None
    out = {name: fmean(s.mean(name) or 0.0 for s in split) for name in names}
    out[""] = fmean(s.span_s or 0.0 for s in split)
    return out


def _state(rounds: Sequence[RoundClock]) -> dict[str, float]:
    names = {name for r in rounds for name in r.state}
    return {name: median(r.state[name] for r in rounds if name in r.state) for name in sorted(names)}


def _interval(diffs: Sequence[float], level: float) -> tuple[float, float]:
    """The t interval of the diffs' mean, each bound at `level` (looks.radius, the gate's t bound); unbounded with
    fewer than two."""
    if len(diffs) < 2:
        return -math.inf, math.inf
    mean = fmean(diffs)
    radius = looks.radius(looks.Look(len(diffs), mean, stdev(diffs)), level)
    return mean - radius, mean + radius


def where_time_went(samples: Sequence[Sequence[PairClocks]], alpha: float = ALPHA, upto: str = "end") -> WhereTimeWent:
    """Each component's change over `samples` (per sample, its pairs of rounds), largest |change| first.

    A sample's change of a component is the mean over its pairs of candidate minus reference (each half the mean of
    its rounds); the change reported is the mean over samples, the interval the t interval over them (unbounded with
    fewer than two).
    """
    every = [r for sample in samples for pair in sample for side in pair for r in side]
    names = [n for n in COMPONENTS if any(r.split.mean(n) is not None for r in every)]
    per_sample: list[tuple[dict[str, float], dict[str, float]]] = []
    for sample in samples:
        halves = [(c, r) for cand, ref in sample if (c := _side_means(cand, names)) and (r := _side_means(ref, names))]
        if halves:
            keys = [*names, ""]
            per_sample.append(
                (
                    {k: fmean(c[k] for c, _ in halves) for k in keys},
                    {k: fmean(r[k] for _, r in halves) for k in keys},
                )
            )
    cands = [r for sample in samples for cand, _ in sample for r in cand]
    refs = [r for sample in samples for _, ref in sample for r in ref]
    sources = sorted({r.split.source for r in every})
    cand_state, ref_state = _state(cands), _state(refs)
    base = WhereTimeWent(
        upto=upto,
        source=" + ".join(sources) if sources else "none",
        samples=len(per_sample),
        span=None,
        changes=(),
        state=tuple(
            StateChange(name, ref_state[name], cand_state[name])
            for name in sorted(cand_state.keys() & ref_state.keys())
            if cand_state[name] != ref_state[name]
        ),
        client_bound=(sum(r.client_bound for r in cands), sum(r.client_bound for r in refs)),
        rounds=(len(cands), len(refs)),
        contradictions=(sum(r.split.contradictions for r in cands), sum(r.split.contradictions for r in refs)),
        contradiction=next((r.split.contradiction for r in every if r.split.contradiction), None),
        unread=next((r.unread for r in every if r.unread), None),
    )
    if not per_sample:
        return base
    level = alpha / (2 * max(len(names), 1))

    def change(key: str, label: str, span_change: float | None) -> ComponentChange:
        diffs = [c[key] - r[key] for c, r in per_sample]
        mean = fmean(diffs)
        lower, upper = _interval(diffs, level)
        return ComponentChange(
            label,
            fmean(r[key] for _, r in per_sample),
            fmean(c[key] for c, _ in per_sample),
            mean,
            mean / span_change if span_change else None,
            lower,
            upper,
        )

    span = change("", "end to end" if upto == "end" else "time to first token", None)
    changes = sorted((change(n, n, span.change_s) for n in names), key=lambda c: -abs(c.change_s))
    return replace(base, span=span, changes=tuple(changes))


def pair_clocks(samples: Samples, clock_of: Callable[[RoundFigures], RoundClock | None]) -> list[list[PairClocks]]:
    """The gate's samples (gate/samples.py) as the rounds' clocks: what where_time_went takes, from the same pairs
    the decision used. A round without a clock is left out of its half."""
    return [
        [
            (
                [c for r in cand if (c := clock_of(r)) is not None],
                [c for r in ref if (c := clock_of(r)) is not None],
            )
            for cand, ref in sample.pairs
        ]
        for sample in samples.samples
    ]


@dataclass(frozen=True, slots=True)
class NoSplit:
    """Why a comparison carries no split of its change: said in its JSON (`where_time_went: null` beside the reason)
    and its report, never silently absent."""

    reason: str


Where = WhereTimeWent | NoSplit
"""What a verdict says of where its change's time went."""

STORED_NO_SPLIT = NoSplit(
    "a stored baseline keeps no components of a request's time, so its change cannot be split (an A/B with "
    "reference= splits its change)"
)
CAPACITY_NO_SPLIT = NoSplit(
    "a capacity comparison has no pairs of rounds at one level to split (the Welch form over each side's boots is not "
    "written yet)"
)


def split_change(
    candidate: Sequence[RoundFigures], reference: Sequence[RoundFigures], upto: Upto = "end", alpha: float = ALPHA
) -> WhereTimeWent:
    """The split of an A/B's change of end-to-end time (or of TTFT), from the same samples (gate/samples.py) the gate
    decided on."""
    clock_of: Callable[[RoundFigures], RoundClock | None] = (
        (lambda r: r.clock) if upto == "end" else (lambda r: r.clock_ttft)
    )
    return where_time_went(pair_clocks(pair_samples(candidate, reference), clock_of), alpha, upto)
