"""An A/B item's rounds as pairs: which candidate round goes with which reference round, and which pairs a neighbour spoiled.

A pair is one round a side played back to back (paired in time), or, where both
servers cannot be up together, one boot a side (paired in boots: the boot's mean
log). The pair's log ratio is the sample; drift slower than a pair cancels in it.
What does not cancel is a neighbour that started or stopped between the pair's two
halves: such a pair is left out of the decision and counted, never silently dropped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean

from ..figures.summary import RoundFigures

DISTURBED_CORES = 0.25
"""Cores of other processes' CPU plus steal by which a pair's two halves may differ before the pair is redone: a neighbour
that came or went between them. A steady neighbour slows both halves alike, and its pairs stay."""


def _key(round_: RoundFigures) -> int:
    return round_.pair if round_.pair is not None else round_.boot


def _groups(rounds: Sequence[RoundFigures]) -> dict[int, list[RoundFigures]]:
    groups: dict[int, list[RoundFigures]] = {}
    for round_ in rounds:
        groups.setdefault(_key(round_), []).append(round_)
    return groups


def _host_load(rounds: Sequence[RoundFigures]) -> float | None:
    measured = [r.other_cpu_cores + (r.steal_cores or 0.0) for r in rounds if r.other_cpu_cores is not None]
    return fmean(measured) if measured else None


def disturbance(candidate: Sequence[RoundFigures], reference: Sequence[RoundFigures]) -> float | None:
    """How many more cores a neighbour held in one half of a pair than in the other; None where the host load was not measured."""
    a, b = _host_load(candidate), _host_load(reference)
    return None if a is None or b is None else abs(a - b)


@dataclass(frozen=True)
class Pairs:
    """The pairs both sides completed, in time order, and the keys of those left out as disturbed."""

    keys: tuple[int, ...]
    disturbed: tuple[int, ...]
    candidate: dict[int, list[RoundFigures]]
    reference: dict[int, list[RoundFigures]]

    def log_values(self, figure: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Per kept pair with a positive value on both sides: the mean log of `figure` on the candidate's half and the reference's."""
        cand, ref = [], []
        for key in self.keys:
            a = _mean_log(self.candidate[key], figure)
            b = _mean_log(self.reference[key], figure)
            if a is not None and b is not None:
                cand.append(a)
                ref.append(b)
        return tuple(cand), tuple(ref)


def _mean_log(rounds: Sequence[RoundFigures], figure: str) -> float | None:
    values = [v for r in rounds if (v := r.figures.get(figure)) is not None and v > 0]
    return fmean(math.log(v) for v in values) if values else None


def pair_up(candidate: Sequence[RoundFigures], reference: Sequence[RoundFigures], disturbed_cores: float = DISTURBED_CORES) -> Pairs:
    """The pairs of an A/B item: matched by pair (or boot) index, kept in time order, those a neighbour spoiled set apart."""
    cand, ref = _groups(candidate), _groups(reference)
    keys: list[int] = []
    disturbed: list[int] = []
    for key in sorted(set(cand) & set(ref)):
        gap = disturbance(cand[key], ref[key])
        (disturbed if gap is not None and gap > disturbed_cores else keys).append(key)
    return Pairs(tuple(keys), tuple(disturbed), cand, ref)
