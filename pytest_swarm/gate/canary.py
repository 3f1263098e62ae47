"""A stored-baseline item gated relative to its canary: the runner's drift cancelled, and reported.

Item and canary are measured in pairs as an A/B item is with its reference; each sample's log ratio item / canary is
the figure with the runner's speed divided out, tested at planned looks against the ratio's recorded mean, taken as a
fixed number (why, and why recording runs until the standard error is a fifth of the tolerance: docs/gate.md)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from statistics import fmean, stdev
from typing import Any

from ..figures.registry import direction_of
from ..figures.summary import RoundFigures
from .entries import CanaryBaseline, FigureBaseline, TestBaseline
from .notes import Disturbed, Drift, Note, NotInBaseline, NoValue, PairsPlayed
from .samples import DISTURBED_CORES, Samples, samples
from .statistics import Comparison, PairedClaim, compare_paired_all

RECORD_MIN_SAMPLES = 5
"""The fewest samples a canary entry is recorded from, however precise they look."""

RECORD_PRECISION = 0.2
"""A recording stops once the standard error of each gated figure's mean ratio to the canary is this share of the
tolerance."""


def relative_logs(found: Samples, figure: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per sample with the figure on both sides: the log of the item's figure over the canary's, and the canary's own
    log."""
    logs_item, logs_canary = found.log_values(figure)
    return tuple(a - b for a, b in zip(logs_item, logs_canary, strict=True)), logs_canary


def _log_tolerance(tolerance: float) -> float:
    return -math.log(1.0 - tolerance)


def standard_error(logs: Sequence[float]) -> float:
    return stdev(logs) / math.sqrt(len(logs)) if len(logs) >= 2 else math.inf


def recorded_precisely(
    item: Sequence[RoundFigures], canary: Sequence[RoundFigures], gate: Sequence[str], tolerance: float
) -> bool:
    """Whether a recording can stop: every gated figure has RECORD_MIN_SAMPLES samples and a standard error of its mean
    ratio to the canary within RECORD_PRECISION of the tolerance (both in logs)."""
    found = samples(item, canary)
    for figure in gate:
        logs, _ = relative_logs(found, figure)
        if len(logs) < RECORD_MIN_SAMPLES or standard_error(logs) > RECORD_PRECISION * _log_tolerance(tolerance):
            return False
    return True


def with_canary(
    entry: TestBaseline,
    item: Sequence[RoundFigures],
    canary: Sequence[RoundFigures],
    gate: Sequence[str],
    server: dict[str, Any],
) -> TestBaseline:
    """The entry with what its canary gives a later run to normalise by: per gated figure its ratio to the canary per
    sample, and the canary's own values."""
    figures: dict[str, FigureBaseline] = dict(entry.figures)
    yardstick: dict[str, tuple[float, ...]] = {}
    found = samples(item, canary)
    for figure in gate:
        logs, canary_logs = relative_logs(found, figure)
        if figure in figures and logs:
            figures[figure] = replace(figures[figure], relative=tuple(math.exp(v) for v in logs))
            yardstick[figure] = tuple(math.exp(v) for v in canary_logs)
    return replace(entry, figures=figures, canary=CanaryBaseline(server, yardstick))


def _drift(canary_logs: Sequence[float], recorded: CanaryBaseline, figure: str) -> float | None:
    """The canary's figure now over its recorded value (geometric means): how far the runner drifted, seen by this
    figure."""
    was = recorded.figures.get(figure)
    if not was or not canary_logs:
        return None
    return math.exp(fmean(canary_logs) - fmean(math.log(v) for v in was))


def canary_comparisons(
    item: Sequence[RoundFigures],
    canary: Sequence[RoundFigures],
    gate: Sequence[str],
    tolerance: float,
    entry: TestBaseline,
    alpha: float,
) -> tuple[list[Comparison], list[Note]]:
    """The item's `gate` claims relative to the canary; each `baseline` is the recorded value scaled by the canary's
    drift."""
    if entry.canary is None:
        raise ValueError("canary_comparisons needs an entry recorded with a canary")
    found = samples(item, canary)
    claims: list[PairedClaim] = []
    notes: list[Note] = []
    drifts: list[tuple[str, float]] = []
    for figure in gate:
        recorded = entry.figures.get(figure)
        logs, canary_logs = relative_logs(found, figure)
        if recorded is None or not recorded.relative:
            notes.append(NotInBaseline(figure, relative=True))
            continue
        if not logs:
            notes.append(NoValue(figure, "canary"))
            continue
        stored = fmean(math.log(v) for v in recorded.relative)
        drift = _drift(canary_logs, entry.canary, figure)
        if drift is not None:
            drifts.append((figure, drift))
        now_canary = fmean(canary_logs)
        claims.append(
            PairedClaim(
                figure,
                direction_of(figure),
                tuple(v - stored for v in logs),
                math.exp(fmean(logs) + now_canary),
                math.exp(stored + now_canary),
                recorded.tolerance if recorded.tolerance is not None else tolerance,
            )
        )
    comparisons = [replace(c, stored=True) for c in compare_paired_all(claims, alpha)] if claims else []
    if comparisons:
        notes.insert(0, PairsPlayed(comparisons[0].samples or 0, found.pairs, "canary"))
    if drifts:
        notes.insert(1, Drift(tuple(drifts)))
    if found.disturbed:
        notes.append(Disturbed(found.disturbed, DISTURBED_CORES))
    return comparisons, notes
