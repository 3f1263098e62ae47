"""An item's verdict: its figures against its baseline entry or A/B reference, and its hard limits; and the reverse,
the entry a result records."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from statistics import fmean
from typing import Any

from ..core.limits import NO_FAILURES, Limit
from ..figures.failures import causes_text
from ..figures.registry import direction_of, sweep_relative
from ..figures.summary import ItemFigures, RoundFigures
from ..settings import GateSettings
from ..specs import Criteria
from .canary import canary_comparisons
from .capacity import CapacityFound, capacity_comparison, capacity_notes, stored_capacity
from .entries import FigureBaseline, TestBaseline
from .factors import THROUGHPUT, Factor, throughput_factors
from .notes import (
    BusyHost,
    Disturbed,
    Improved,
    NeverMeasured,
    NoBaseline,
    NoReferenceCapacity,
    Note,
    NotEvaluated,
    NotInBaseline,
    NoValue,
    OneBoot,
    PairsPlayed,
    RecordedWithoutCanary,
    Undecided,
)
from .samples import DISTURBED_CORES, samples
from .statistics import (
    Claim,
    Comparison,
    PairedClaim,
    Verdict,
    compare_all,
    compare_paired_all,
    expectation,
    log_samples,
)
from .where import (
    UPTOS,
    NoSplit,
    Where,
    WhereTimeWent,
    recorded_where,
    split_capacities,
    split_change,
    split_stored,
    split_stored_capacity,
)

BUSY_HOST_CORES = 0.25
"""Cores taken from the item on average (other processes' CPU plus steal) above which a FAIL is flagged as possibly the
host's doing."""


def host_load(rounds: Sequence[RoundFigures]) -> tuple[float, float] | None:
    """Average cores over the rounds that measured them: busy in other processes, and stolen; None where none did."""
    measured = [
        (c.other_cpu_cores, c.steal_cores or 0.0)
        for c in (r.conditions for r in rounds)
        if c.other_cpu_cores is not None
    ]
    if not measured:
        return None
    return fmean(other for other, _ in measured), fmean(steal for _, steal in measured)


@dataclass(frozen=True)
class GateOutcome:
    """An item's verdict and what led to it: each claim's comparison, the hard limits it broke, the notes."""

    verdict: Verdict
    comparisons: tuple[Comparison, ...]
    broken_limits: tuple[str, ...]
    notes: tuple[Note, ...]
    against: str = "baseline"
    """What the figures were compared with: the stored "baseline", or the A/B "reference" measured in the same run."""
    where: Where | None = None
    """Where the change's time went (gate/where.py): its split by component, or why it has none."""
    where_ttft: WhereTimeWent | None = None
    """The same split of the change of the time to the first token (A/B items)."""
    factors: tuple[Factor, ...] = ()
    """An A/B's gated throughput ratio split into factors that multiply to it (gate/factors.py), the largest share
    first; empty where throughput was not compared."""

    def fails(self, strict: bool) -> bool:
        """FAIL always fails; INCONCLUSIVE and NO_BASELINE only under --swarm-strict."""
        return self.verdict is Verdict.FAIL or (strict and self.verdict in (Verdict.INCONCLUSIVE, Verdict.NO_BASELINE))


def _limits(criteria: Criteria, baseline: TestBaseline | None) -> list[tuple[str, Limit]]:
    limits = list(criteria.slo)
    if baseline is not None:
        for name, figure in baseline.figures.items():
            if figure.min is not None:
                limits.append((name, Limit(">=", figure.min)))
            if figure.max is not None:
                limits.append((name, Limit("<=", figure.max)))
    return limits


def _stored_limits(
    result: ItemFigures,
    criteria: Criteria,
    baseline: TestBaseline | None,
    without_c1: str,
    capacity: CapacityFound | None = None,
) -> tuple[tuple[str, ...], list[Note]]:
    """What every stored-baseline verdict starts from: the hard limits broken, and notes on limits or a missing
    baseline."""
    limits = _limits(criteria, baseline)
    broken = _broken(result, limits, capacity) + _failed(result, criteria.failures)
    notes = unevaluated(result, limits, without_c1)
    if baseline is None:
        notes.append(NoBaseline())
    return broken, notes


def evaluate(
    result: ItemFigures,
    criteria: Criteria,
    baseline: TestBaseline | None,
    settings: GateSettings,
    without_c1: str = "it did not run before it",
    canary_asked: bool = False,
) -> GateOutcome:
    """A plain item against its stored baseline entry. `without_c1` says why a sweep-relative limit had no C=1 item;
    `canary_asked` that the entry lacks the canary asked for."""
    broken, notes = _stored_limits(result, criteria, baseline, without_c1)
    comparisons: list[Comparison] = []
    if baseline is not None:
        if canary_asked and baseline.canary is None:
            notes.append(RecordedWithoutCanary())
        claims = []
        for figure in criteria.gate:
            recorded = baseline.figures.get(figure)
            current = log_samples(result.per_boot(figure))
            if recorded is None:
                notes.append(NotInBaseline(figure))
            elif current.n == 0:
                notes.append(NoValue(figure, "baseline"))
            else:
                tolerance = recorded.tolerance if recorded.tolerance is not None else criteria.tolerance
                claims.append(Claim(figure, recorded.direction, current, recorded.log_sample(), tolerance, stored=True))
        comparisons = compare_all(claims, settings.alpha, settings.cv_floor) if claims else []
        if any(c.one_boot for c in comparisons):
            notes.append(OneBoot(settings.cv_floor))
        notes += _improved(comparisons)
    outcome = _outcome(result, comparisons, broken, notes, Verdict.NO_BASELINE, "baseline")
    if baseline is None:
        return outcome
    return _split(
        outcome, *(split_stored(result.rounds, baseline.where, upto, floor=settings.cv_floor) for upto in UPTOS)
    )


def evaluate_canaried(
    result: ItemFigures,
    canary: ItemFigures,
    criteria: Criteria,
    baseline: TestBaseline | None,
    settings: GateSettings,
    undecided: str | None = None,
    without_c1: str = "it did not run before it",
) -> GateOutcome:
    """A canaried item against an entry recorded with one, each figure relative to the canary's, so a runner's drift
    cancels."""
    if baseline is None or baseline.canary is None:
        return evaluate(result, criteria, baseline, settings, without_c1)
    broken, notes = _stored_limits(result, criteria, baseline, without_c1)
    comparisons, said = canary_comparisons(
        result.rounds, canary.rounds, criteria.gate, criteria.tolerance, baseline, settings.alpha
    )
    notes += said
    if undecided is not None and not decided(comparisons):
        notes.append(Undecided(undecided))
    notes += _improved(comparisons)
    outcome = _outcome(result, comparisons, broken, notes, Verdict.NO_BASELINE, "baseline")
    return _split(
        outcome, *(split_stored(result.rounds, baseline.where, upto, floor=settings.cv_floor) for upto in UPTOS)
    )


def evaluate_capacity(
    result: ItemFigures,
    criteria: Criteria,
    baseline: TestBaseline | None,
    settings: GateSettings,
    capacity: CapacityFound,
    without_c1: str = "it did not run before it",
) -> GateOutcome:
    """A capacity item (`capacity`: its search) against its stored capacity alone (gate/capacity.py)."""
    broken, notes = _stored_limits(result, criteria, baseline, without_c1, capacity)
    notes += capacity_notes(capacity)
    comparisons: list[Comparison] = []
    if baseline is not None:
        claim = stored_capacity(baseline, criteria.tolerance)
        if claim is None:
            notes.append(NotInBaseline("capacity"))
        else:
            comparisons = [capacity_comparison(capacity, *claim, settings.alpha)]
            notes += _improved(comparisons)
    outcome = _outcome(result, comparisons, broken, notes, Verdict.NO_BASELINE, "baseline")
    if baseline is None:
        return outcome
    where = baseline.where
    return _split(outcome, *(split_stored_capacity(capacity, where, upto, floor=settings.cv_floor) for upto in UPTOS))


def _split(outcome: GateOutcome, end: Where, first_token: Where) -> GateOutcome:
    """The outcome with where its change's time went: of the whole request, and of its time to the first token where
    that split could be made."""
    return replace(outcome, where=end, where_ttft=first_token if isinstance(first_token, WhereTimeWent) else None)


def _improved(comparisons: Sequence[Comparison]) -> list[Note]:
    improved = tuple(c.figure for c in comparisons if c.improved)
    return [Improved(improved)] if improved else []


def paired_comparisons(
    candidate: Sequence[RoundFigures], reference: Sequence[RoundFigures], criteria: Criteria, alpha: float
) -> tuple[list[Comparison], list[Note]]:
    """The A/B item's claims on the samples so far; the same rounds always give the same verdict."""
    found = samples(candidate, reference)
    notes: list[Note] = []
    claims = []
    wanted = [(figure, None) for figure in criteria.gate] + [(figure, limit) for figure, limit in criteria.expect]
    for figure, limit in wanted:
        cand, ref = found.log_values(figure)
        if not cand:
            notes.append(NoValue(figure, "pair"))
            continue
        diffs = tuple(a - b for a, b in zip(cand, ref, strict=True))
        measured, baseline = math.exp(fmean(cand)), math.exp(fmean(ref))
        if limit is None:
            claims.append(PairedClaim(figure, direction_of(figure), diffs, measured, baseline, criteria.tolerance))
        else:
            direction, threshold = expectation(limit.op, limit.bound)
            claims.append(
                PairedClaim(figure, direction, diffs, measured, baseline, criteria.tolerance, threshold, str(limit))
            )
    if found.disturbed:
        notes.append(Disturbed(found.disturbed, DISTURBED_CORES))
    comparisons = compare_paired_all(claims, alpha) if claims else []
    if comparisons:
        both_up = any(r.pair is not None for r in candidate)
        notes.insert(0, PairsPlayed(comparisons[0].samples or 0, found.pairs, "rounds" if both_up else "boots"))
    return comparisons, notes


def decided(comparisons: Sequence[Comparison]) -> bool:
    """Whether an A/B search can stop: a claim FAILed, or every claim PASSed."""
    verdicts = {c.verdict for c in comparisons}
    return bool(comparisons) and (Verdict.FAIL in verdicts or verdicts == {Verdict.PASS})


def claims_verdict(comparisons: Sequence[Comparison]) -> Verdict:
    """The claims' verdict alone, with no hard limit: any FAIL fails, PASS needs every claim to pass."""
    verdicts = {c.verdict for c in comparisons}
    if Verdict.FAIL in verdicts:
        return Verdict.FAIL
    return Verdict.PASS if verdicts == {Verdict.PASS} else Verdict.INCONCLUSIVE


def evaluate_ab(
    result: ItemFigures,
    reference: ItemFigures | None,
    criteria: Criteria,
    settings: GateSettings,
    undecided: str | None = None,
    without_c1: str = "it did not run before it",
) -> GateOutcome:
    """The candidate against the reference beside it. Hard limits hold the candidate only; a crash either side fails
    the item; nothing comparable is INCONCLUSIVE, not passed."""
    broken = _broken(result, list(criteria.slo)) + _failed(result, criteria.failures, "candidate: ")
    skipped = unevaluated(result, list(criteria.slo), without_c1)
    if reference is None:
        return _outcome(
            result, [], broken, [NeverMeasured()], Verdict.INCONCLUSIVE, "reference", NoSplit("the reference never ran")
        )
    broken += ((f"reference: {reference.aborted}",) if reference.aborted else ()) + _failed(
        reference, criteria.failures, "reference: "
    )
    comparisons, notes = paired_comparisons(result.rounds, reference.rounds, criteria, settings.alpha)
    notes += skipped
    if undecided is not None and not decided(comparisons):
        notes.append(Undecided(undecided))
    outcome = _outcome(result, comparisons, broken, notes, Verdict.INCONCLUSIVE, "reference")
    if any(c.figure == THROUGHPUT for c in comparisons):
        outcome = replace(outcome, factors=throughput_factors(result.rounds, reference.rounds))
    return _split(outcome, *(split_change(result.rounds, reference.rounds, upto) for upto in UPTOS))


def evaluate_capacity_ab(
    result: ItemFigures,
    reference: ItemFigures | None,
    criteria: Criteria,
    settings: GateSettings,
    found: CapacityFound,
    other: CapacityFound | None,
) -> GateOutcome:
    """Two servers' capacities measured in one run: the candidate must carry what the reference carried, within the
    tolerance. Hard limits (`slo=`) hold the candidate only."""
    broken = _broken(result, list(criteria.slo), found) + _failed(result, criteria.failures, "candidate: ")
    notes = capacity_notes(found, "candidate")
    if other is None or reference is None:
        notes.append(NeverMeasured(in_search=True))
        never = NoSplit("the reference's search never ran")
        return _outcome(result, [], broken, notes, Verdict.INCONCLUSIVE, "reference", never)
    notes += capacity_notes(other, "reference")
    broken += ((f"reference: {reference.aborted}",) if reference.aborted else ()) + _failed(
        reference, criteria.failures, "reference: "
    )
    splits = [split_capacities(found, other, upto, floor=settings.cv_floor) for upto in UPTOS]
    if other.capacity is None:
        notes.append(NoReferenceCapacity())
        return _split(_outcome(result, [], broken, notes, Verdict.INCONCLUSIVE, "reference"), *splits)
    comparisons = [capacity_comparison(found, other.capacity, criteria.tolerance, settings.alpha, "reference")]
    return _split(_outcome(result, comparisons, broken, notes, Verdict.INCONCLUSIVE, "reference"), *splits)


def _broken(
    result: ItemFigures, limits: list[tuple[str, Limit]], capacity: CapacityFound | None = None
) -> tuple[str, ...]:
    """Every hard limit the result breaks, and the guard's abort: each fails the item whatever the statistics say. A
    sweep-relative limit with no C=1 item is `unevaluated`, not broken."""
    scalars = result.scalars() | {"capacity": capacity.capacity if capacity is not None else None}
    return tuple(
        f"{name} = {'none' if scalars.get(name) is None else format(scalars[name], '.4g')}, limit {limit}"
        for name, limit in limits
        if not limit.holds(scalars.get(name)) and not (name in sweep_relative() and scalars.get(name) is None)
    ) + ((result.aborted,) if result.aborted else ())


def unevaluated(result: ItemFigures, limits: list[tuple[str, Limit]], without_c1: str) -> list[Note]:
    """The notes for limits on sweep-relative figures left without a value: never a FAIL, always said, with
    `without_c1`'s why."""
    scalars = result.scalars()
    return [
        NotEvaluated(name, str(limit), without_c1)
        for name, limit in limits
        if name in sweep_relative() and scalars.get(name) is None
    ]


def _failed(result: ItemFigures, allowance: tuple[tuple[str, Limit], ...], side: str = "") -> tuple[str, ...]:
    """The failed requests beyond the item's allowance, in one line with their kinds; `side` names an A/B side."""
    scalars = result.scalars()
    over = [f"{name} {limit}" for name, limit in allowance if not limit.holds(scalars.get(name))]
    if not over:
        return ()
    allowed = (
        "none allowed (allow_failures= sets how many an overload experiment may have)"
        if allowance == NO_FAILURES
        else f"allowed {' and '.join(over)}"
    )
    share = f" ({result.failures / result.requests:.1%})" if result.requests else ""
    return (
        f"{side}{result.failures} of {result.requests} requests failed{share}, {allowed}: "
        f"{causes_text(result.failure_causes)}",
    )


def _outcome(
    result: ItemFigures,
    comparisons: list[Comparison],
    broken: tuple[str, ...],
    notes: list[Note],
    empty: Verdict,
    against: str,
    where: Where | None = None,
) -> GateOutcome:
    """The item's verdict from its claims: any FAIL or broken limit fails it, PASS needs every claim to pass; `empty`
    when none ran."""
    verdicts = {c.verdict for c in comparisons}
    if broken or Verdict.FAIL in verdicts:
        verdict = Verdict.FAIL
        load = host_load(result.rounds)
        if load is not None and sum(load) > BUSY_HOST_CORES:
            notes.append(BusyHost(*load))
    elif Verdict.INCONCLUSIVE in verdicts:
        verdict = Verdict.INCONCLUSIVE
    elif not comparisons:
        verdict = empty
    else:
        verdict = Verdict.PASS
    return GateOutcome(verdict, tuple(comparisons), broken, tuple(notes), against, where)


def baseline_entry(
    result: ItemFigures,
    criteria: Criteria,
    server: dict[str, Any],
    recorded: dict[str, Any],
    capacity: CapacityFound | None = None,
) -> TestBaseline:
    """The entry for `result`: per gated figure, one geometric mean per boot (or the rounds of a lone boot); a
    capacity item's capacity."""
    figures = {}
    if capacity is not None and capacity.capacity is not None:
        figures["capacity"] = FigureBaseline("higher", (capacity.capacity,), per_boot=False)
    for figure in criteria.gate:
        if figure == "capacity":
            continue
        per_boot = result.per_boot(figure)
        if not per_boot:
            continue
        if len(per_boot) >= 2:
            samples = tuple(math.exp(fmean(math.log(v) for v in rounds)) for rounds in per_boot)
        else:
            samples = tuple(per_boot[0])
        figures[figure] = FigureBaseline(direction_of(figure), samples, per_boot=len(per_boot) >= 2)
    level = capacity.capacity if capacity is not None else None
    where = recorded_where(result.rounds, level) if capacity is None or level is not None else None
    return TestBaseline(
        figures, server, recorded, result.boots, len(result.rounds) // max(result.boots, 1), where=where
    )
