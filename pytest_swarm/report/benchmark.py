"""Feed a swarm item's rounds into pytest-benchmark, so --benchmark-autosave/--benchmark-compare work alongside. Uses
its fixture's stats object: it has no public call for this."""

from __future__ import annotations

from typing import Any

from ..figures.summary import ItemFigures

MODE = "pytest-swarm"


def feed(benchmark: Any, result: ItemFigures) -> None:
    """Each measured round's wall-clock becomes one benchmark round; the figures go to extra_info."""
    if benchmark._mode not in (None, MODE):
        raise RuntimeError(f"the benchmark fixture was already used in {benchmark._mode} mode")
    benchmark._mode = MODE
    stats = benchmark._make_stats(1)
    for round_ in result.rounds:
        stats.update(round_.wall_s)
    benchmark.extra_info.update({f"swarm.{k}": v for k, v in result.scalars().items()})
