"""Figures added by the pytest_swarm_figures hook, checked before they join, so a bad one fails its item, not a
report."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence

from ..core.errors import AddedFigureError


def added_figures(returned: Sequence[Mapping[str, object] | None], taken: Collection[str]) -> dict[str, float]:
    """The figures every implementation returned, merged; `taken` holds the plugin's own names."""
    added: dict[str, float] = {}
    for figures in returned:
        if figures is None:
            continue
        if not isinstance(figures, Mapping):
            raise AddedFigureError(
                f"pytest_swarm_figures returns a mapping of figure names to numbers, got {type(figures).__name__}"
            )
        for name, value in figures.items():
            if not isinstance(name, str) or not name:
                raise AddedFigureError(f"pytest_swarm_figures: a figure's name is a non-empty string, got {name!r}")
            if name in taken:
                raise AddedFigureError(f"pytest_swarm_figures: {name!r} is one of the plugin's own figures")
            if name in added:
                raise AddedFigureError(f"pytest_swarm_figures: {name!r} was returned by two implementations")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise AddedFigureError(f"pytest_swarm_figures: {name!r} is {value!r}, not a finite number")
            added[name] = float(value)
    return added
