"""What one item measured and how it was judged: the one type every report reads.

Kept even when the test's own asserts fail afterwards, and written to the reports
when the run is interrupted (marked incomplete).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .figures.summary import SwarmResult
from .gate.verdict import GateOutcome
from .specs import ServerSpec, SwarmConfig, SwarmItem


@dataclass
class ItemResult:
    item: SwarmItem
    server: ServerSpec
    """The server really measured: the marker's, or the endpoint that --swarm-endpoint put in its place."""
    server_info: dict[str, Any]
    result: SwarmResult
    outcome: GateOutcome | None = None
    incomplete: bool = False
    slot_problem: str | None = None
    """Why the measurement contradicts the slots the spec asked for (the item fails with it), or None."""

    @property
    def nodeid(self) -> str:
        return self.item.nodeid

    @property
    def test_key(self) -> str:
        return self.item.test_key

    @property
    def config(self) -> SwarmConfig:
        return self.item.config
