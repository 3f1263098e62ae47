"""An item's verdict: its figures against its baseline entry (or its A/B reference's) and its hard limits.

Also the reverse direction: a result as the baseline entry `--swarm-update-baselines` records.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import Any, Protocol

from ..core.figure_names import SWEEP_RELATIVE, direction_of
from ..core.limits import NO_FAILURES, Limit
from ..figures.failures import causes_text
from ..figures.summary import ItemFigures, RoundFigures
from ..settings import GateSettings
from .canary import canary_comparisons
from .capacity import CapacityFound, capacity_comparison, capacity_line, capacity_notes, stored_capacity
from .entries import FigureBaseline, TestBaseline
from .looks import LAST_LOOK
from .pairs import disturbed_note, samples
from .statistics import (
    BOOTS_LIMIT,
    Claim,
    Comparison,
    PairedClaim,
    Verdict,
    compare_all,
    compare_paired_all,
    expectation,
    log_samples,
)

NO_BASELINE_NOTE = "no baseline for this test on this hardware: record one with --swarm-update-baselines"
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


class GatePolicy(Protocol):
    """What an item asks of the gate (its marker's gate=, tolerance= and slo=): the marker's config is one."""

    @property
    def gate(self) -> tuple[str, ...]: ...

    @property
    def tolerance(self) -> float: ...

    @property
    def slo(self) -> tuple[tuple[str, Limit], ...]: ...

    @property
    def expect(self) -> tuple[tuple[str, Limit], ...]: ...

    @property
    def failures(self) -> tuple[tuple[str, Limit], ...]: ...

    @property
    def canary(self) -> object | None: ...


@dataclass(frozen=True)
class GateOutcome:
    """An item's verdict and what led to it: each claim's comparison, the hard limits it broke, the notes."""

    verdict: Verdict
    comparisons: tuple[Comparison, ...]
    broken_limits: tuple[str, ...]
    notes: tuple[str, ...]
    against: str = "baseline"
    """What the figures were compared with: the stored "baseline", or the A/B "reference" measured in the same run."""

    def fails(self, strict: bool) -> bool:
        """FAIL always fails; INCONCLUSIVE and NO_BASELINE only under --swarm-strict."""
        return self.verdict is Verdict.FAIL or (strict and self.verdict in (Verdict.INCONCLUSIVE, Verdict.NO_BASELINE))

    def message(self, nodeid: str) -> str:
        lines = [f"{nodeid}: swarm gate {self.verdict.value.upper()}"]
        lines += [f"  hard limit broken: {b}" for b in self.broken_limits]
        lines += [f"  {comparison_line(c, self.against)}" for c in self.comparisons]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def comparison_line(c: Comparison, against: str) -> str:
    """One claim's numbers: both sides, the ratio with its two one-sided bounds, what it was tested against, the
    verdict.

    An expectation speaks in measured / reference, as it was written; the tolerance
    gate in the better-is-up ratio, whose threshold is 1 - tolerance.
    """
    if c.figure == "capacity":
        return capacity_line(c, against)
    sense = "higher is better" if c.direction == "higher" else "lower is better"
    if c.expected is not None:
        low, high = c.raw_bounds
        line = (
            f"{c.figure}: {against} {c.baseline:.4g}, measured {c.measured:.4g}, measured/{against} {c.raw_ratio:.3f} "
            f"(one-sided bounds {low:.3f} and {high:.3f}), expected {c.expected}: {c.verdict.value.upper()}"
        )
    else:
        line = (
            f"{c.figure} ({sense}): {against} {c.baseline:.4g}, measured {c.measured:.4g}, ratio {c.ratio:.3f} "
            f"(one-sided bounds: lower {c.lower:.3f} at alpha {c.pass_alpha:.3g}, "
            f"upper {c.upper:.3f} at alpha {c.alpha:.3g}), "
            f"tolerance {c.tolerance:.0%}: {c.verdict.value.upper()}"
        )
    if c.samples is not None:
        line += f" after {c.samples} sample(s)"
        if c.verdict is Verdict.INCONCLUSIVE:
            line += (
                f"; ~{c.samples_to_decide} samples (boots of both sides) would most likely decide it"
                if c.samples_to_decide is not None
                else f"; the ratio sits too near the threshold for a look up to sample {LAST_LOOK} to likely decide it"
            )
        return line
    if c.verdict is Verdict.INCONCLUSIVE:
        per = "of this run" if c.stored else "a side"
        line += (
            f"; ~{c.boots_to_decide} boots {per} would most likely decide it"
            if c.boots_to_decide is not None
            else f"; not even {BOOTS_LIMIT} boots {per} would most likely decide it"
            + (
                ": the stored baseline's own spread is too wide, record it with more boots"
                if c.stored
                else ": the ratio sits on the threshold"
            )
        )
    return line


def _limits(config: GatePolicy, baseline: TestBaseline | None) -> list[tuple[str, Limit]]:
    limits = list(config.slo)
    if baseline is not None:
        for name, figure in baseline.figures.items():
            if figure.min is not None:
                limits.append((name, Limit(">=", figure.min)))
            if figure.max is not None:
                limits.append((name, Limit("<=", figure.max)))
    return limits


def _stored_limits(
    result: ItemFigures,
    config: GatePolicy,
    baseline: TestBaseline | None,
    without_c1: str,
    capacity: CapacityFound | None = None,
) -> tuple[tuple[str, ...], list[str]]:
    """What every stored-baseline verdict starts from: the hard limits broken (the marker's and the entry's min/max,
    the failure allowance), and the notes on limits left unevaluated or on a missing baseline."""
    limits = _limits(config, baseline)
    broken = _broken(result, limits, capacity) + _failed(result, config.failures)
    notes = unevaluated(result, limits, without_c1)
    if baseline is None:
        notes.append(NO_BASELINE_NOTE)
    return broken, notes


def evaluate(
    result: ItemFigures,
    config: GatePolicy,
    baseline: TestBaseline | None,
    settings: GateSettings,
    without_c1: str = "it did not run before it",
) -> GateOutcome:
    """A plain item against its stored baseline entry: the tolerance claim per gated figure, the hard limits.

    The absolute figures are compared, boots (or one boot's rounds) as samples, by
    Welch's test. `without_c1`: why a limit on a sweep-relative figure found no C=1 item
    to be read against (the sweep says).
    """
    broken, notes = _stored_limits(result, config, baseline, without_c1)
    comparisons: list[Comparison] = []
    if baseline is not None:
        if config.canary is not None and baseline.canary is None:
            notes.append(
                "the baseline was recorded without a canary: absolute figures compared, "
                "so a slower runner reads as a regression; "
                "--swarm-update-baselines records it with one"
            )
        claims = []
        for figure in config.gate:
            recorded = baseline.figures.get(figure)
            current = log_samples(result.per_boot(figure))
            if recorded is None:
                notes.append(f"{figure}: gated but not in the baseline")
            elif current.n == 0:
                notes.append(f"{figure}: no measured value to compare (all requests failed?)")
            else:
                tolerance = recorded.tolerance if recorded.tolerance is not None else config.tolerance
                claims.append(Claim(figure, recorded.direction, current, recorded.log_sample(), tolerance, stored=True))
        comparisons = compare_all(claims, settings.alpha, settings.cv_floor) if claims else []
        if any(c.one_boot for c in comparisons):
            notes.append(
                "the verdict rests on one boot on at least one side "
                f"(rounds as samples, spread floored at CV {settings.cv_floor:.0%}); "
                "boots=4 gives independent samples"
            )
        notes += _improved(comparisons)
    return _outcome(result, comparisons, broken, notes, Verdict.NO_BASELINE, "baseline")


def evaluate_canaried(
    result: ItemFigures,
    canary: ItemFigures,
    config: GatePolicy,
    baseline: TestBaseline | None,
    settings: GateSettings,
    undecided: str | None = None,
    without_c1: str = "it did not run before it",
) -> GateOutcome:
    """A stored-baseline item measured beside its canary, against an entry recorded with one: each figure relative to
    the canary's (gate/canary.py), so a runner's drift cancels out. `undecided` says how the search ended when it
    ended undecided. An entry recorded without a canary is judged on absolute figures (`evaluate`)."""
    if baseline is None or baseline.canary is None:
        return evaluate(result, config, baseline, settings, without_c1)
    broken, notes = _stored_limits(result, config, baseline, without_c1)
    comparisons, said = canary_comparisons(
        result.rounds, canary.rounds, config.gate, config.tolerance, baseline, settings.alpha
    )
    notes += said
    if undecided is not None and not decided(comparisons):
        notes.append(undecided)
    notes += _improved(comparisons)
    return _outcome(result, comparisons, broken, notes, Verdict.NO_BASELINE, "baseline")


def evaluate_capacity(
    result: ItemFigures,
    config: GatePolicy,
    baseline: TestBaseline | None,
    settings: GateSettings,
    capacity: CapacityFound,
    without_c1: str = "it did not run before it",
) -> GateOutcome:
    """A capacity item (`capacity`: its search) against its stored capacity alone (gate/capacity.py)."""
    broken, notes = _stored_limits(result, config, baseline, without_c1, capacity)
    notes += capacity_notes(capacity)
    comparisons: list[Comparison] = []
    if baseline is not None:
        claim = stored_capacity(baseline, config.tolerance)
        if claim is None:
            notes.append("capacity: gated but not in the baseline")
        else:
            comparisons = [capacity_comparison(capacity, *claim, settings.alpha)]
            notes += _improved(comparisons)
    return _outcome(result, comparisons, broken, notes, Verdict.NO_BASELINE, "baseline")


def _improved(comparisons: Sequence[Comparison]) -> list[str]:
    improved = [c.figure for c in comparisons if c.improved]
    return (
        [f"significantly better than the baseline ({', '.join(improved)}): consider re-baselining"] if improved else []
    )


def paired_comparisons(
    candidate: Sequence[RoundFigures], reference: Sequence[RoundFigures], config: GatePolicy, alpha: float
) -> tuple[list[Comparison], list[str]]:
    """The A/B item's claims on the samples measured so far: tolerance claims on `gate`, expected ratios on `expect`.

    A sample is a boot of both sides (gate/pairs.py). Called after every boot while
    the item measures (to stop once decided) and once more on the whole record when
    it is judged: the same rounds give the same verdict.
    """
    found = samples(candidate, reference)
    notes: list[str] = []
    claims = []
    wanted = [(figure, None) for figure in config.gate] + [(figure, limit) for figure, limit in config.expect]
    for figure, limit in wanted:
        cand, ref = found.log_values(figure)
        if not cand:
            notes.append(f"{figure}: no pair with a measured value on both sides to compare (all requests failed?)")
            continue
        diffs = tuple(a - b for a, b in zip(cand, ref, strict=True))
        measured, baseline = math.exp(fmean(cand)), math.exp(fmean(ref))
        if limit is None:
            claims.append(PairedClaim(figure, direction_of(figure), diffs, measured, baseline, config.tolerance))
        else:
            direction, threshold = expectation(limit.op, limit.bound)
            claims.append(
                PairedClaim(figure, direction, diffs, measured, baseline, config.tolerance, threshold, str(limit))
            )
    if found.disturbed:
        notes.append(disturbed_note(found.disturbed))
    comparisons = compare_paired_all(claims, alpha) if claims else []
    if comparisons:
        notes.insert(
            0,
            (
                f"{comparisons[0].samples} boot(s) of both sides, {found.pairs} pair(s) of rounds in random order "
                "(both servers up)"
                if any(r.pair is not None for r in candidate)
                else f"{comparisons[0].samples} pair(s) of boots, one side up at a time "
                "(they share GPUs, generators or a Ray cluster)"
            ),
        )
    return comparisons, notes


def decided(comparisons: Sequence[Comparison]) -> bool:
    """Whether an A/B search can stop: a claim FAILed, or every claim PASSed."""
    verdicts = {c.verdict for c in comparisons}
    return bool(comparisons) and (Verdict.FAIL in verdicts or verdicts == {Verdict.PASS})


def evaluate_ab(
    result: ItemFigures,
    reference: ItemFigures | None,
    config: GatePolicy,
    settings: GateSettings,
    undecided: str | None = None,
    without_c1: str = "it did not run before it",
) -> GateOutcome:
    """The candidate against the reference measured beside it, pair by pair (paired_comparisons).

    No stored baseline is read. Hard limits (`slo=`) hold the candidate only; a crash
    or guard abort on either side fails the item. An item where nothing could be
    compared (every request failed on a side, or the reference never ran) is
    INCONCLUSIVE, not passed. Failed requests on either side beyond the item's allowance
    fail it too. `undecided` says how the search for pairs ended when it
    ended undecided (the budget it reached), and goes into the notes.
    """
    broken = _broken(result, list(config.slo)) + _failed(result, config.failures, "candidate: ")
    skipped = unevaluated(result, list(config.slo), without_c1)
    if reference is None:
        note = "the reference was never measured: the item stopped in the candidate's first boot"
        return _outcome(result, [], broken, [note], Verdict.INCONCLUSIVE, "reference")
    broken += ((f"reference: {reference.aborted}",) if reference.aborted else ()) + _failed(
        reference, config.failures, "reference: "
    )
    comparisons, notes = paired_comparisons(result.rounds, reference.rounds, config, settings.alpha)
    notes += skipped
    if undecided is not None and not decided(comparisons):
        notes.append(undecided)
    return _outcome(result, comparisons, broken, notes, Verdict.INCONCLUSIVE, "reference")


def evaluate_capacity_ab(
    result: ItemFigures,
    reference: ItemFigures | None,
    config: GatePolicy,
    settings: GateSettings,
    found: CapacityFound,
    other: CapacityFound | None,
) -> GateOutcome:
    """Two servers' capacities measured in one run: the candidate must carry what the reference carried, within the
    tolerance. Hard limits (`slo=`) hold the candidate only."""
    broken = _broken(result, list(config.slo), found) + _failed(result, config.failures, "candidate: ")
    notes = [f"candidate: {n}" for n in capacity_notes(found)]
    if other is None or reference is None:
        notes.append("the reference was never measured: the item stopped in the candidate's search")
        return _outcome(result, [], broken, notes, Verdict.INCONCLUSIVE, "reference")
    notes += [f"reference: {n}" for n in capacity_notes(other)]
    broken += ((f"reference: {reference.aborted}",) if reference.aborted else ()) + _failed(
        reference, config.failures, "reference: "
    )
    if other.capacity is None:
        notes.append("the reference held the condition at no level measured: there is no capacity to compare with")
        return _outcome(result, [], broken, notes, Verdict.INCONCLUSIVE, "reference")
    comparisons = [capacity_comparison(found, other.capacity, config.tolerance, settings.alpha, "reference")]
    return _outcome(result, comparisons, broken, notes, Verdict.INCONCLUSIVE, "reference")


def _broken(
    result: ItemFigures, limits: list[tuple[str, Limit]], capacity: CapacityFound | None = None
) -> tuple[str, ...]:
    """Every hard limit the result breaks, and the guard's abort: each fails the item whatever the statistics say.

    A limit on a sweep-relative figure that has no value is not broken: it was not
    evaluated (`unevaluated` says so), since the C=1 item it is read against did not run.
    A limit on `capacity` holds the search's capacity (None where it held nowhere).
    """
    scalars = result.scalars() | {"capacity": capacity.capacity if capacity is not None else None}
    return tuple(
        f"{name} = {'none' if scalars.get(name) is None else format(scalars[name], '.4g')}, limit {limit}"
        for name, limit in limits
        if not limit.holds(scalars.get(name)) and not (name in SWEEP_RELATIVE and scalars.get(name) is None)
    ) + ((result.aborted,) if result.aborted else ())


def unevaluated(result: ItemFigures, limits: list[tuple[str, Limit]], without_c1: str) -> list[str]:
    """The notes for limits on sweep-relative figures left without a value: never a FAIL, always said, with
    `without_c1`'s why."""
    scalars = result.scalars()
    return [
        f"limit {name} {limit} not evaluated: {name} is read against the C=1 item of this sweep, and {without_c1}"
        for name, limit in limits
        if name in SWEEP_RELATIVE and scalars.get(name) is None
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
    notes: list[str],
    empty: Verdict,
    against: str,
) -> GateOutcome:
    """The item's verdict from its claims: any FAIL or broken limit fails it, PASS needs every claim to pass; `empty`
    when none ran."""
    verdicts = {c.verdict for c in comparisons}
    if broken or Verdict.FAIL in verdicts:
        verdict = Verdict.FAIL
        load = host_load(result.rounds)
        if load is not None and sum(load) > BUSY_HOST_CORES:
            other, steal = load
            stolen = (
                f" and the hypervisor took {steal:.2f} (steal time: another VM on the same host)"
                if steal >= 0.005
                else ""
            )
            notes.append(
                f"other processes kept {other:.2f} cores busy{stolen} on average during the rounds: "
                "a busy host is the commonest false regression"
            )
    elif Verdict.INCONCLUSIVE in verdicts:
        verdict = Verdict.INCONCLUSIVE
    elif not comparisons:
        verdict = empty
    else:
        verdict = Verdict.PASS
    return GateOutcome(verdict, tuple(comparisons), broken, tuple(notes), against)


def baseline_entry(
    result: ItemFigures,
    config: GatePolicy,
    server: dict[str, Any],
    recorded: dict[str, Any],
    capacity: CapacityFound | None = None,
) -> TestBaseline:
    """The entry for `result`: per gated figure, one geometric mean per boot (or the rounds of a lone boot); a
    capacity item's capacity."""
    figures = {}
    if capacity is not None and capacity.capacity is not None:
        figures["capacity"] = FigureBaseline("higher", (capacity.capacity,), per_boot=False)
    for figure in config.gate:
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
    return TestBaseline(figures, server, recorded, result.boots, len(result.rounds) // max(result.boots, 1))
