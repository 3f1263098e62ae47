"""What one item measured and how it was judged: the one type every report reads.

Kept even when the test's own asserts fail afterwards, and written to the reports
when the run is interrupted (marked incomplete).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.records import ServerInfo
from ..figures.summary import ItemFigures
from ..gate.capacity import CapacityFound
from ..gate.verdict import GateOutcome
from ..specs import MarkerConfig, PlannedItem, ServerSpec


@dataclass(frozen=True)
class ReferenceSide:
    """The A/B reference measured beside an item (`reference=`): its server, what it said of itself, its figures."""

    server: ServerSpec
    server_info: ServerInfo
    result: ItemFigures
    capacity: CapacityFound | None = None
    """A capacity item's reference: its own search."""


@dataclass(frozen=True)
class ItemResult:
    """An item as measured, then as judged: the session concludes it into a copy with its `outcome`, never in place."""

    item: PlannedItem
    server: ServerSpec
    """The server really measured: the marker's, or the endpoint that --swarm-endpoint put in its place."""
    server_info: ServerInfo
    result: ItemFigures
    outcome: GateOutcome | None = None
    incomplete: bool = False
    problem: str | None = None
    """Why the measurement contradicts the experiment asked for (slots, cache mode, schedule, token counts): the item
    fails with it."""
    reference: ReferenceSide | None = None
    """The A/B reference's side, for an item with `reference=`; its outcome compares the two."""
    search: str | None = None
    """An A/B item whose search for a verdict ended undecided: the budget it reached (max_pairs, max_seconds)."""
    pairing: str | None = None
    """How an A/B item's sides (or an item and its canary) were paired on the runner, and why (run/pairing.py)."""
    canary: ReferenceSide | None = None
    """The canary a stored-baseline item was measured interleaved with (specs/canary.py), if it was."""
    capacity: CapacityFound | None = None
    """A capacity item's search (`capacity=`): every level tried, its verdict, the capacity found; its figures are those
    of the capacity level."""
    answer_lengths: str | None = None
    """A `max_tokens="dataset"` item: how the dataset's answers were counted (the server's tokenizer, or an estimate
    from words where it has none), for the report to say how far to trust the pinned lengths."""

    @property
    def nodeid(self) -> str:
        return self.item.nodeid

    @property
    def test_key(self) -> str:
        return self.item.test_key

    @property
    def config(self) -> MarkerConfig:
        return self.item.config

    def reference_item(self) -> ItemResult | None:
        """The reference side as an item of its own (no verdict), so reports show it with the same columns."""
        if self.reference is None:
            return None
        ref = self.reference
        return ItemResult(self.item, ref.server, ref.server_info, ref.result, incomplete=self.incomplete)
