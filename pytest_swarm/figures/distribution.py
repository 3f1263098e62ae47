"""Percentiles of one figure over requests or gaps. numpy loads on first use: the marker reads the registry at
collection."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Distribution:
    """Percentiles of one figure over requests (or gaps between tokens)."""

    n: int
    min: float | None
    p50: float | None
    p95: float | None
    p99: float | None
    max: float | None
    mean: float | None

    @property
    def median(self) -> float | None:
        return self.p50

    @classmethod
    def of(cls, values: Sequence[float]) -> Distribution:
        """Linear-interpolated percentiles (numpy's default); all None when empty."""
        if not values:
            return cls(0, None, None, None, None, None, None)
        import numpy as np  # here: see the module's docstring

        array = np.asarray(values, dtype=float)
        p50, p95, p99 = (float(v) for v in np.percentile(array, [50, 95, 99]))
        return cls(len(values), float(array.min()), p50, p95, p99, float(array.max()), float(array.mean()))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["median"] = self.p50
        return data
