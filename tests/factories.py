"""Building blocks for report and gate tests: an item's result as the session would have made it."""

from __future__ import annotations

from typing import Any

from pytest_swarm.figures.summary import SwarmResult
from pytest_swarm.gate.verdict import GateOutcome
from pytest_swarm.results import ItemResult
from pytest_swarm.specs import SwarmConfig, SwarmItem


def item_result(
    nodeid: str,
    test_key: str,
    config: SwarmConfig,
    result: SwarmResult,
    outcome: GateOutcome | None = None,
    info: dict[str, Any] | None = None,
    level: int | None = None,
) -> ItemResult:
    """The ItemResult of `result` at `level` (by default the result's workers in process mode, its concurrency otherwise)."""
    if level is None:
        level = result.workers if config.mode == "process" else result.concurrency
    item = SwarmItem(nodeid, test_key, config, level, config.load(level))
    return ItemResult(item, config.server, info or {}, result, outcome)
