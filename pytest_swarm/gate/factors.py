"""The gated throughput ratio of an A/B, split into factors that multiply to it: streams decoding at once, and tokens
a second a stream (figures/throughput.py).

Each factor's ratio is read from the gate's own samples (a boot's mean pair log ratio), so the factors' ratios
multiply to the gated ratio exactly where every round decoded; its interval is a paired t interval at the level
Holm's step-down over the factors tests it at, as the components' are (where.py). `share` is the factor's part of
the gated figure's log ratio: the shares sum to one, and the largest explains the claim. Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from statistics import fmean
from typing import Any

from ..figures.summary import RoundFigures
from ..figures.throughput import AT_ONCE, FACTORS
from .samples import samples
from .statistics import holm_intervals
from .where import ALPHA, interval

THROUGHPUT = "effective_tps"
"""The gated figure the factors multiply to."""
WORDS = {AT_ONCE: "streams decoding at once", "stream_tps": "tokens a second a stream"}


@dataclass(frozen=True, slots=True)
class Factor:
    """One factor of the gated throughput ratio: each side's value (geometric means over the samples), their ratio
    and its interval, and its share of the log ratio (None where the gated figure did not move)."""

    factor: str
    reference: float
    candidate: float
    ratio: float
    lower: float
    upper: float
    share: float | None

    @property
    def words(self) -> str:
        return WORDS[self.factor]

    def to_dict(self) -> dict[str, Any]:
        """The JSON item's entry: `{factor, reference, candidate, ratio, lower, upper, share}` (an unbounded interval:
        null)."""
        return {
            "factor": self.factor,
            "reference": self.reference,
            "candidate": self.candidate,
            "ratio": self.ratio,
            "lower": self.lower if math.isfinite(self.lower) else None,
            "upper": self.upper if math.isfinite(self.upper) else None,
            "share": self.share,
        }


def throughput_factors(
    candidate: Sequence[RoundFigures], reference: Sequence[RoundFigures], alpha: float = ALPHA
) -> tuple[Factor, ...]:
    """The factors of the A/B's effective tok/s ratio, the largest share first; empty where a sample lacks one (a round
    with no request that decoded two token reads)."""
    found = samples(candidate, reference)
    gated, _ = found.log_values(THROUGHPUT)
    logs = {name: found.log_values(name) for name in FACTORS}
    if not gated or any(len(cand) != len(gated) for cand, _ in logs.values()):
        return ()
    total = fmean(a - b for a, b in zip(*found.log_values(THROUGHPUT), strict=True))  # the gated log ratio
    diffs = {name: [a - b for a, b in zip(cand, ref, strict=True)] for name, (cand, ref) in logs.items()}
    family = holm_intervals([partial(interval, diffs[name]) for name in logs], alpha / 2)
    factors = []
    for (name, (cand, ref)), (low, high) in zip(logs.items(), family, strict=True):
        mean = fmean(diffs[name])
        share = mean / total if abs(total) > 1e-12 else None
        factors.append(
            Factor(
                name, math.exp(fmean(ref)), math.exp(fmean(cand)), math.exp(mean), math.exp(low), math.exp(high), share
            )
        )
    return tuple(sorted(factors, key=lambda f: -(f.share if f.share is not None else abs(math.log(f.ratio)))))
