"""What a finished run leaves in the results store, and the trends its report draws. A failing store costs the
history, never the reports."""

from __future__ import annotations

import socket
import subprocess
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..core.errors import HistoryError
from ..core.version import __version__
from ..gate.trends import Trend
from ..results.item import BisectStepResult, ItemResult
from .history import BisectStepRecord, HistoryStore, ItemRecord, RunRecord

TREND_RUNS = 200
"""Runs a trend chart shows at most (the newest): older steps have been seen by then."""


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _item(item: ItemResult) -> ItemRecord:
    figures = {name: value for name, value in item.result.scalars().items() if value is not None}
    verdicts = {c.figure: c.verdict.value for c in item.outcome.comparisons} if item.outcome else {}
    engine = item.server_info.get("engine_version")
    return ItemRecord(
        item.nodeid,
        item.test_key,
        item.server.label,
        None if engine is None else str(engine),
        item.outcome.verdict.value if item.outcome else None,
        item.incomplete,
        figures,
        verdicts,
        tuple(_step(step) for step in item.bisect.steps) if item.bisect is not None else (),
    )


def _step(result: BisectStepResult) -> BisectStepRecord:
    first = next(iter(result.outcome.comparisons), None)
    return BisectStepRecord(
        result.probed,
        result.step.finding.value,
        result.outcome.verdict.value,
        None if first is None else first.ratio,
        None if first is None else first.lower,
        None if first is None else first.upper,
        result.pairs,
        result.seconds,
    )


def run_record(
    items: Sequence[ItemResult], hardware: str, origin: dict[str, Any], started_at: str, complete: bool
) -> RunRecord:
    """The run as stored, one row per node id (its last measurement), so a rerun in a session keeps the history."""
    last = {i.nodeid: i for i in items}
    return RunRecord(
        uuid.uuid4().hex,
        started_at,
        utc_now(),
        hardware,
        origin.get("git_commit"),
        str(origin.get("plugin_version") or __version__),
        socket.gethostname(),
        complete,
        tuple(_item(i) for i in last.values()),
    )


def finish(store: HistoryStore, run: RunRecord, items: Sequence[ItemResult]) -> tuple[list[Trend], str | None]:
    """Append the run; the trend of every gated figure of its items; and what went wrong, if anything did."""
    try:
        store.append(run)
        trends = []
        for item in items:
            for figure in item.config.criteria.gate:
                points = store.series(item.nodeid, figure, run.hardware, last=TREND_RUNS).get(
                    (item.nodeid, run.hardware), []
                )
                if points:
                    trends.append(Trend.of(item.nodeid, run.hardware, figure, points))
    except HistoryError as exc:
        return [], str(exc)
    return trends, None


def provenance(rootdir: Path) -> dict[str, Any]:
    """When and by what a baseline was recorded: date, plugin version, git commit if any."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=rootdir, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "plugin_version": __version__,
        "git_commit": commit,
    }
