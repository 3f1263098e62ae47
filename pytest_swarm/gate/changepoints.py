"""Change points in one figure's history: steps no single run failed, such as slow drift. The penalty's calibration
is in docs/history.md."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean, median

from ..core.figure_names import HIGHER

PENALTY = 5.0
MIN_RUNS = 3
"""Runs a level needs before it counts as one: fewer is an outlier, not a step."""
NOISE_FLOOR = 0.005
"""Least log-spread assumed: a series steadier than half a percent must not turn rounding into steps."""
CLIP = 3.0
"""Sigmas from the local median past which a run is an outlier, pulled in: an l2 cost would see one bad run as a
level."""


@dataclass(frozen=True)
class ChangePoint:
    """Where a figure's history moved to a new level and stayed: the run it starts at, and the two levels."""

    index: int
    """The first run on the new level."""
    before: float
    """Geometric mean of the level that ends here."""
    after: float
    """Geometric mean of the level that starts here."""
    direction: str

    @property
    def ratio(self) -> float:
        return self.after / self.before

    @property
    def regression(self) -> bool:
        """Whether the step went the bad way for this figure."""
        return self.ratio < 1 if self.direction == HIGHER else self.ratio > 1

    def describe(self) -> str:
        return f"x{self.ratio:.3f} ({'worse' if self.regression else 'better'}): {self.before:.4g} -> {self.after:.4g}"


def noise(logs: Sequence[float]) -> float:
    """Robust sigma of a log series from its neighbours' differences (MAD x 1.4826 / sqrt 2), floored."""
    if len(logs) < 2:
        return NOISE_FLOOR
    diffs = [b - a for a, b in itertools.pairwise(logs)]
    centre = median(diffs)
    return max(1.4826 * median(abs(d - centre) for d in diffs) / math.sqrt(2), NOISE_FLOOR)


def _clipped(logs: Sequence[float], sigma: float) -> list[float]:
    """Each log pulled to within CLIP sigmas of the median of its neighbourhood (MIN_RUNS each side)."""
    out = []
    for i, value in enumerate(logs):
        centre = median(logs[max(0, i - MIN_RUNS + 1) : i + MIN_RUNS])
        out.append(min(max(value, centre - CLIP * sigma), centre + CLIP * sigma))
    return out


def change_points(values: Sequence[float], direction: str) -> list[ChangePoint]:
    """The steps in `values` (oldest first, all positive), in order; none for a series too short to hold two levels."""
    if len(values) < 2 * MIN_RUNS or any(not v > 0 or not math.isfinite(v) for v in values):
        return []
    import numpy as np
    import ruptures  # here: it takes a second to import, paid only when a series is long enough to analyse

    logs = [math.log(v) for v in values]
    sigma = noise(logs)
    penalty = PENALTY * sigma**2 * math.log(len(logs))
    ends = (
        ruptures.Pelt(model="l2", min_size=MIN_RUNS, jump=1)
        .fit(np.asarray(_clipped(logs, sigma)).reshape(-1, 1))
        .predict(pen=penalty)
    )
    starts = [0, *ends[:-1]]
    levels = [math.exp(fmean(logs[a:b])) for a, b in zip(starts, ends, strict=True)]
    return [
        ChangePoint(start, before, after, direction)
        for start, before, after in zip(starts[1:], levels, levels[1:], strict=False)
    ]
