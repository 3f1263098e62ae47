"""The split of a change: how much of a comparison's change of end-to-end time (or of TTFT) each component carried.

Each component gets a change in seconds with an interval: paired t on the A/B's samples, Welch's form for a stored
baseline or capacity. Each component's bounds are at the level Holm's step-down tests it at, so a component whose
interval holds 0 is never named, and the family's error stays within alpha. The
interval explains a decision; it does not take one. Pure (docs/guides/why-did-it-fail.md)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from statistics import fmean, median, stdev
from typing import Any

from scipy import stats

from ..figures.components import COMPONENTS, RoundClock, Upto
from ..figures.summary import RoundFigures
from . import looks
from .capacity import CapacityFound, Step
from .entries import WhereBaseline
from .samples import Samples
from .samples import samples as pair_samples
from .statistics import Interval, holm_intervals, welch

ALPHA = 0.005
"""The components' intervals together, two-sided: Holm's step-down over the components, each bound's first step at
alpha / (2 x components), as is the whole span's. Half the gate's 0.01, so that an unchanged component is named in at
most 1% of A/Bs with room a simulation can show: at 1% exactly, half of all such simulations land above it."""

PairClocks = tuple[Sequence[RoundClock], Sequence[RoundClock]]
"""One pair's rounds: the candidate's, then the reference's."""


@dataclass(frozen=True, slots=True)
class ComponentChange:
    """One component's change, its share of the movement and its interval; `share` is None where nothing moved."""

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
    """Where an A/B's time went: each component's change, largest first, with what moved beside it."""

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
    unpaired: str | None = None
    sides: tuple[str, str] = ("reference", "candidate")
    """What the two sides are called where they are drawn: an A/B's reference and candidate, a stored entry's
    recording and this run."""
    tokens: tuple[float, float] | None = None
    """Each side's mean answer in tokens (reference, candidate), where both rounds counted them."""
    uncompared: tuple[tuple[str, str], ...] = ()
    """Components one side's clock measured and the other's did not (another engine, another path), each with the side
    that did: never compared, never called a change."""

    @property
    def moved(self) -> tuple[ComponentChange, ...]:
        """The components whose interval excludes 0, largest |change| first: the only ones ever named."""
        return tuple(c for c in self.changes if c.moved)

    def to_json(self) -> list[dict[str, Any]]:
        """`where_time_went` in a JSON item: every component, largest |change| first."""
        return [c.to_dict() for c in self.changes]


def _side_means(rounds: Sequence[RoundClock], names: Sequence[str]) -> dict[str, float] | None:
    """Rounds' mean of each component (0 where a round lacks it) and of the span (""): one half of a pair, or one
    sample of an unpaired side."""
    split = [r.split for r in rounds if r.split.span_s is not None and r.split.means]
    if not split:
        return None
    out = {name: fmean(s.mean(name) or 0.0 for s in split) for name in names}
    out[""] = fmean(s.span_s or 0.0 for s in split)
    return out


def _names(rounds: Sequence[RoundClock]) -> list[str]:
    return [n for n in COMPONENTS if any(r.split.mean(n) is not None for r in rounds)]


def _shared(candidate: Sequence[str], reference: Sequence[str]) -> tuple[list[str], tuple[tuple[str, str], ...]]:
    """The components both sides' clocks measured, in order; and those only one did, each with the side that did."""
    both = [n for n in COMPONENTS if n in candidate and n in reference]
    one = tuple(
        (n, "candidate" if n in candidate else "reference") for n in COMPONENTS if (n in candidate) != (n in reference)
    )
    return both, one


def _state(rounds: Sequence[RoundClock]) -> dict[str, float]:
    names = {name for r in rounds for name in r.state}
    return {name: median(r.state[name] for r in rounds if name in r.state) for name in sorted(names)}


def interval(diffs: Sequence[float], level: float) -> tuple[float, float]:
    """The t interval of the diffs' mean, each bound at `level` (looks.radius, the gate's t bound); unbounded with
    fewer than two."""
    if len(diffs) < 2:
        return -math.inf, math.inf
    mean = fmean(diffs)
    radius = looks.radius(looks.Look(len(diffs), mean, stdev(diffs)), level)
    return mean - radius, mean + radius


def welch_interval(
    candidate: Sequence[float],
    reference: Sequence[float],
    level: float,
    floor: float = 0.0,
    scale: tuple[float, float] = (0.0, 0.0),
) -> tuple[float, float]:
    """Welch's t interval of two independent means; `floor` is the least coefficient of variation a side is given, so
    two steady sides are not read as certain, of its own mean or of its `scale` where that is larger (a component's
    floor is of the whole request's time: a boot's luck moves whole requests, and lands in a small component too)."""
    if len(candidate) < 2 or len(reference) < 2:
        return -math.inf, math.inf
    diff = fmean(candidate) - fmean(reference)
    sd_c, sd_r = (
        max(stdev(side), floor * max(abs(fmean(side)), whole))
        for side, whole in zip((candidate, reference), scale, strict=True)
    )
    se, df = welch(sd_c, len(candidate), sd_r, len(reference))
    if se == 0.0:
        return diff, diff
    radius = float(stats.t.ppf(1.0 - level, df)) * se
    return diff - radius, diff + radius


def _ordered(changes: Sequence[ComponentChange]) -> tuple[ComponentChange, ...]:
    """Largest |change| first, each with its share of the components' movement."""
    moved = sum(abs(c.change_s) for c in changes)
    shared = [replace(c, share=abs(c.change_s) / moved if moved else None) for c in changes]
    return tuple(sorted(shared, key=lambda c: -abs(c.change_s)))


def _span_label(upto: str) -> str:
    return "end to end" if upto == "end" else "time to first token"


def _base(
    upto: str,
    cands: Sequence[RoundClock],
    refs: Sequence[RoundClock],
    ref_state: Mapping[str, float] | None = None,
    ref_rounds: int | None = None,
) -> WhereTimeWent:
    """What a split says beside its changes; a stored reference's state comes from the recording."""
    every = [*cands, *refs]
    sources = sorted({r.split.source for r in every})
    cand_state, before = _state(cands), _state(refs) if ref_state is None else ref_state
    return WhereTimeWent(
        upto=upto,
        source=" + ".join(sources) if sources else "none",
        samples=0,
        span=None,
        changes=(),
        state=tuple(
            StateChange(name, before[name], cand_state[name])
            for name in sorted(cand_state.keys() & before.keys())
            if cand_state[name] != before[name]
        ),
        client_bound=(sum(r.client_bound for r in cands), sum(r.client_bound for r in refs)),
        rounds=(len(cands), len(refs) if ref_rounds is None else ref_rounds),
        contradictions=(sum(r.split.contradictions for r in cands), sum(r.split.contradictions for r in refs)),
        contradiction=next((r.split.contradiction for r in every if r.split.contradiction), None),
        unread=next((r.unread for r in every if r.unread), None),
        tokens=_tokens(cands, refs),
    )


def _tokens(cands: Sequence[RoundClock], refs: Sequence[RoundClock]) -> tuple[float, float] | None:
    """Each side's mean answer in tokens, over its rounds that counted them; None where a side has none."""
    now, before = ([r.tokens for r in side if r.tokens is not None] for side in (cands, refs))
    return (fmean(before), fmean(now)) if now and before else None


def where_time_went(samples: Sequence[Sequence[PairClocks]], alpha: float = ALPHA, upto: str = "end") -> WhereTimeWent:
    """Each component's change over `samples`, largest first; the interval is unbounded with fewer than two."""
    cands = [r for sample in samples for cand, _ in sample for r in cand]
    refs = [r for sample in samples for _, ref in sample for r in ref]
    names, uncompared = _shared(_names(cands), _names(refs))
    keys = [*names, ""]
    per_sample: list[tuple[dict[str, float], dict[str, float]]] = []
    for sample in samples:
        halves = [(c, r) for cand, ref in sample if (c := _side_means(cand, names)) and (r := _side_means(ref, names))]
        if halves:
            per_sample.append(
                ({k: fmean(c[k] for c, _ in halves) for k in keys}, {k: fmean(r[k] for _, r in halves) for k in keys})
            )
    base = replace(_base(upto, cands, refs), uncompared=uncompared)
    if not per_sample:
        return base
    diffs = {key: [c[key] - r[key] for c, r in per_sample] for key in keys}

    def change(key: str, label: str, bounds: tuple[float, float]) -> ComponentChange:
        reference, candidate = fmean(r[key] for _, r in per_sample), fmean(c[key] for c, _ in per_sample)
        return ComponentChange(label, reference, candidate, fmean(diffs[key]), None, *bounds)

    family = holm_intervals([partial(interval, diffs[n]) for n in names], alpha / 2)
    changes = _ordered([change(n, n, bounds) for n, bounds in zip(names, family, strict=True)])
    span = change("", _span_label(upto), interval(diffs[""], alpha / (2 * max(len(names), 1))))
    return replace(base, samples=len(per_sample), span=span, changes=changes)


def clock_samples(by_boot: Sequence[Sequence[RoundClock]]) -> tuple[list[dict[str, float]], bool]:
    """A side's unpaired samples: one a boot with two boots or more, else one a round; and whether they are boots."""
    names = _names([r for boot in by_boot for r in boot])
    boots = [m for boot in by_boot if (m := _side_means(boot, names))]
    if len(boots) >= 2:
        return boots, True
    rounds = [m for boot in by_boot for r in boot if (m := _side_means([r], names))]
    return rounds, False


def unpaired_split(
    candidate: Sequence[Sequence[RoundClock]],
    reference: Sequence[Mapping[str, float]],
    base: WhereTimeWent,
    compared: str,
    alpha: float = ALPHA,
    floor: float = 0.0,
    reference_per_boot: bool = False,
) -> WhereTimeWent:
    """Each component's change, this side's samples against `reference`'s, in Welch's form; with no floor only where
    both sides' samples are boots (rounds of one boot share its luck)."""
    cand, per_boot = clock_samples(candidate)
    names, uncompared = _shared(
        [n for n in COMPONENTS if any(n in s for s in cand)], [n for n in COMPONENTS if any(n in s for s in reference)]
    )
    said = replace(base, unpaired=compared, uncompared=uncompared)
    if not cand or not reference:
        return said
    least = 0.0 if per_boot and reference_per_boot and len(reference) >= 2 else floor
    whole = (fmean(s.get("", 0.0) for s in cand), fmean(s.get("", 0.0) for s in reference))
    sides = {key: ([s.get(key, 0.0) for s in cand], [s.get(key, 0.0) for s in reference]) for key in [*names, ""]}

    def bounds(key: str) -> Interval:
        return lambda level: welch_interval(*sides[key], level, least, whole)

    def change(key: str, label: str, low_high: tuple[float, float]) -> ComponentChange:
        now, before = sides[key]
        return ComponentChange(label, fmean(before), fmean(now), fmean(now) - fmean(before), None, *low_high)

    family = holm_intervals([bounds(n) for n in names], alpha / 2)
    changes = _ordered([change(n, n, low_high) for n, low_high in zip(names, family, strict=True)])
    span = change("", _span_label(base.upto), bounds("")(alpha / (2 * max(len(names), 1))))
    return replace(said, samples=min(len(cand), len(reference)), span=span, changes=changes)


ClockOf = Callable[[RoundFigures], RoundClock | None]
UPTOS: tuple[Upto, ...] = ("end", "first token")


def clock_of(upto: Upto) -> ClockOf:
    """A round's clock of its whole requests, or of their time to the first token."""
    return (lambda r: r.clock) if upto == "end" else (lambda r: r.clock_ttft)


def by_boot(rounds: Sequence[RoundFigures], clock: ClockOf) -> list[list[RoundClock]]:
    """The rounds' clocks grouped by boot, in boot order; a round without a clock left out."""
    groups: dict[int, list[RoundClock]] = {}
    for round_ in rounds:
        if (c := clock(round_)) is not None:
            groups.setdefault(round_.boot, []).append(c)
    return [groups[boot] for boot in sorted(groups)]


def pair_clocks(samples: Samples, clock: ClockOf) -> list[list[PairClocks]]:
    """The gate's samples (gate/samples.py) as the rounds' clocks: what where_time_went takes, from the same pairs
    the decision used. A round without a clock is left out of its half."""
    return [
        [
            ([c for r in cand if (c := clock(r)) is not None], [c for r in ref if (c := clock(r)) is not None])
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

NOT_RECORDED = NoSplit(
    "the baseline entry keeps no components of a request's time (recorded before they were stored, or its engine "
    "gave no clock): record it again (--swarm-update-baselines) to split its changes"
)


def split_change(
    candidate: Sequence[RoundFigures], reference: Sequence[RoundFigures], upto: Upto = "end", alpha: float = ALPHA
) -> WhereTimeWent:
    """The split of an A/B's change of end-to-end time (or of TTFT), from the same samples (gate/samples.py) the gate
    decided on."""
    return where_time_went(pair_clocks(pair_samples(candidate, reference), clock_of(upto)), alpha, upto)


def recorded_where(rounds: Sequence[RoundFigures], level: float | None = None) -> WhereBaseline | None:
    """What a baseline entry keeps of where its time went; None where no round had a clock."""
    kept: dict[str, dict[str, tuple[float, ...]]] = {}
    per_boot = False
    for upto in UPTOS:
        samples, per_boot_here = clock_samples(by_boot(rounds, clock_of(upto)))
        if not samples:
            return None
        per_boot = per_boot or per_boot_here
        kept[upto] = {("span" if k == "" else k): tuple(s[k] for s in samples) for k in samples[0]}
    clocks = [c for boot in by_boot(rounds, clock_of("end")) for c in boot]
    sources = sorted({c.split.source for c in clocks})
    return WhereBaseline(" + ".join(sources), per_boot, kept["end"], kept["first token"], _state(clocks), level)


def _recorded_samples(recorded: WhereBaseline, upto: Upto) -> list[dict[str, float]]:
    kept = recorded.end if upto == "end" else recorded.first_token
    count = min((len(v) for v in kept.values()), default=0)
    return [{("" if k == "span" else k): v[i] for k, v in kept.items()} for i in range(count)]


RECORDED = ("recorded", "this run")


def _count(n: int, unit: str) -> str:
    return f"{n} {unit}" + ("" if n == 1 else "s")


def split_stored(
    rounds: Sequence[RoundFigures],
    recorded: WhereBaseline | None,
    upto: Upto = "end",
    alpha: float = ALPHA,
    floor: float = 0.0,
) -> Where:
    """The split against a stored baseline, unpaired (Welch), on absolute seconds even for a canaried entry."""
    if recorded is None:
        return NOT_RECORDED
    candidate = by_boot(rounds, clock_of(upto))
    reference = _recorded_samples(recorded, upto)
    now = len(candidate) if len(candidate) >= 2 else sum(len(b) for b in candidate)
    compared = (
        f"this run's {_count(now, 'boot' if len(candidate) >= 2 else 'round')} against the recording's "
        f"{_count(len(reference), 'boot' if recorded.per_boot else 'round')}, unpaired (Welch)"
    )
    base = replace(_base(upto, [c for b in candidate for c in b], [], recorded.state, len(reference)), sides=RECORDED)
    return unpaired_split(candidate, reference, base, compared, alpha, floor, recorded.per_boot)


def _step_clocks(step: Step, upto: Upto) -> list[RoundClock]:
    return list(step.clocks if upto == "end" else step.clocks_ttft)


def split_capacities(
    found: CapacityFound, other: CapacityFound, upto: Upto = "end", alpha: float = ALPHA, floor: float = 0.0
) -> Where:
    """The split of a capacity A/B at one level both searches measured, unpaired: a level's rounds share one boot."""
    mine, theirs = {s.level: s for s in found.steps}, {s.level: s for s in other.steps}
    common = sorted(mine.keys() & theirs.keys())
    if not common:
        return NoSplit(f"the two searches measured no {found.what} in common, so no level's rounds can be compared")
    level = other.capacity if other.capacity in mine and other.capacity in theirs else common[-1]
    cand, ref = _step_clocks(mine[level], upto), _step_clocks(theirs[level], upto)
    ref_samples, _ = clock_samples([ref])
    compared = f"each side's rounds at {found.what} {level:g}, unpaired (Welch)"
    return unpaired_split([cand], ref_samples, _base(upto, cand, ref), compared, alpha, floor)


def split_stored_capacity(
    found: CapacityFound, recorded: WhereBaseline | None, upto: Upto = "end", alpha: float = ALPHA, floor: float = 0.0
) -> Where:
    """The split of a capacity item against its stored entry, at the recorded capacity, unpaired (Welch)."""
    if recorded is None or recorded.level is None:
        return NOT_RECORDED
    step = next((s for s in found.steps if s.level == recorded.level), None)
    if step is None:
        return NoSplit(
            f"this search measured no round at {found.what} {recorded.level:g}, where the baseline's components were "
            "recorded"
        )
    cand = _step_clocks(step, upto)
    reference = _recorded_samples(recorded, upto)
    compared = (
        f"this search's {_count(len(cand), 'round')} at {found.what} {recorded.level:g} against the recording's "
        f"{len(reference)}, unpaired (Welch)"
    )
    base = replace(_base(upto, cand, [], recorded.state, len(reference)), sides=RECORDED)
    return unpaired_split([cand], reference, base, compared, alpha, floor, recorded.per_boot)
