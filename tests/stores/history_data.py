"""Runs as the store keeps them, built by hand so every stored value is known (shared by the SQLite and PostgreSQL tests)."""

from __future__ import annotations

import uuid

from pytest_swarm.stores.history import ItemRecord, RunRecord


def run(
    minute: int,
    value: float = 100.0,
    hardware: str = "testbox",
    nodeid: str = "t.py::test_x[c1]",
    incomplete: bool = False,
    items: int = 1,
) -> RunRecord:
    """One run at 2026-01-01 10:<minute>, its first item's effective_tps at `value`; more items get other node ids."""
    records = tuple(
        ItemRecord(
            nodeid if k == 0 else f"t.py::test_other_{k}",
            "t.py::test_x",
            "llama.cpp",
            "xllamacpp 0.2",
            "pass",
            incomplete,
            {"effective_tps": value, "ttft.p95": 0.5},
            {"effective_tps": "pass"},
        )
        for k in range(items)
    )
    started = f"2026-01-01T{10 + minute // 60:02d}:{minute % 60:02d}:00.000000Z"
    return RunRecord(
        uuid.uuid4().hex, started, started, hardware, "abc1234def", "0.1.0", "host-a", not incomplete, records
    )
