"""An A/B item's rounds as paired samples: one log ratio per boot of both sides, since boots are independent and
pairs of one boot are not (docs/gate.md)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import Protocol

from ..core.records import RoundConditions
from ..figures.summary import RoundFigures

PAIR_TO_BOOT_VARIANCE = 2.3
"""A pair's log-ratio variance over the variance boots add beyond it, as pairs_per_boot weighs them
(benchmarks/gating_results.txt)."""
PAIRS_PER_BOOT = (2, 4)
"""The fewest and most pairs a boot plays when the marker leaves reboot_every open: the t-tests need enough samples."""

DISTURBED_CORES = 0.25
"""Cores of others' CPU and steal by which a pair's halves may differ before the pair is redone: a neighbour came or
went."""


class Measured(Protocol):
    """A round as recorded or as figured: both carry the host's load while it ran."""

    @property
    def conditions(self) -> RoundConditions: ...


def host_cores(rounds: Sequence[Measured]) -> float | None:
    """Mean cores taken from the item over `rounds` (other processes' CPU plus steal); None where none was measured."""
    measured = [
        c.other_cpu_cores + (c.steal_cores or 0.0)
        for c in (r.conditions for r in rounds)
        if c.other_cpu_cores is not None
    ]
    return fmean(measured) if measured else None


def disturbed(candidate: Sequence[Measured], reference: Sequence[Measured], limit: float = DISTURBED_CORES) -> bool:
    """Whether a neighbour came or went between the two halves of a pair: their host loads differ by more than
    `limit`."""
    a, b = host_cores(candidate), host_cores(reference)
    return a is not None and b is not None and abs(a - b) > limit


def _mean_log(rounds: Sequence[RoundFigures], figure: str) -> float | None:
    values = [v for r in rounds if (v := r.figures.get(figure)) is not None and v > 0]
    return fmean(math.log(v) for v in values) if values else None


@dataclass(frozen=True)
class Sample:
    """One boot of both sides: the pairs of rounds it kept, and those left out as disturbed."""

    boot: int
    pairs: tuple[tuple[tuple[RoundFigures, ...], tuple[RoundFigures, ...]], ...]
    disturbed: int

    def log_ratio(self, figure: str) -> tuple[float, float] | None:
        """The boot's mean log of `figure` on each side, over the pairs where both halves have it; None if no pair
        does."""
        halves = [
            (a, b)
            for cand, ref in self.pairs
            if (a := _mean_log(cand, figure)) is not None and (b := _mean_log(ref, figure)) is not None
        ]
        if not halves:
            return None
        return fmean(a for a, _ in halves), fmean(b for _, b in halves)


@dataclass(frozen=True)
class Samples:
    """An A/B item's samples in time order, one per boot that kept at least one pair."""

    samples: tuple[Sample, ...]

    @property
    def pairs(self) -> int:
        return sum(len(s.pairs) for s in self.samples)

    @property
    def disturbed(self) -> int:
        return sum(s.disturbed for s in self.samples)

    def log_values(self, figure: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Per sample with the figure on both sides: the candidate's mean log and the reference's."""
        both = [ratio for s in self.samples if (ratio := s.log_ratio(figure)) is not None]
        return tuple(a for a, _ in both), tuple(b for _, b in both)


def _by(rounds: Sequence[RoundFigures], key: str) -> dict[int, list[RoundFigures]]:
    groups: dict[int, list[RoundFigures]] = {}
    for round_ in rounds:
        index = round_.boot if key == "boot" else round_.pair
        if index is not None:
            groups.setdefault(index, []).append(round_)
    return groups


def samples(
    candidate: Sequence[RoundFigures], reference: Sequence[RoundFigures], limit: float = DISTURBED_CORES
) -> Samples:
    """The item's samples: per boot both sides played, its pairs (by pair index, or the whole boot a side), disturbed
    ones apart."""
    cand_boots, ref_boots = _by(candidate, "boot"), _by(reference, "boot")
    out = []
    for boot in sorted(set(cand_boots) & set(ref_boots)):
        cand_pairs, ref_pairs = _by(cand_boots[boot], "pair"), _by(ref_boots[boot], "pair")
        if cand_pairs or ref_pairs:
            halves = [(tuple(cand_pairs[k]), tuple(ref_pairs[k])) for k in sorted(set(cand_pairs) & set(ref_pairs))]
        else:
            halves = [(tuple(cand_boots[boot]), tuple(ref_boots[boot]))]
        kept = tuple((a, b) for a, b in halves if not disturbed(a, b, limit))
        if kept or len(halves) > len(kept):
            out.append(Sample(boot, kept, len(halves) - len(kept)))
    return Samples(tuple(out))


def pairs_per_boot(boot_s: float, pair_s: float, ratio: float = PAIR_TO_BOOT_VARIANCE) -> int:
    """The pairs a boot of both sides should play for the most information per second (docs/gate.md)."""
    low, high = PAIRS_PER_BOOT
    if pair_s <= 0:
        return high

    def cost(k: int) -> float:
        return (1.0 + ratio / k) * (boot_s + k * pair_s)

    best = math.sqrt(ratio * max(boot_s, 0.0) / pair_s)
    candidates = {min(max(k, low), high) for k in (math.floor(best), math.ceil(best))}
    return min(sorted(candidates), key=cost)
