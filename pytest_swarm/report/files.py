"""The report files a run asked for, written at its end: also after failures and interrupts, never half written."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._util.atomic import write_atomically
from ..gate.trends import Trend
from ..results.item import ItemResult
from ..results.sweeps import SweepFigures
from ..settings import ReportSettings
from .html import write_html
from .json_report import write_json
from .text import markdown


def write_reports(
    settings: ReportSettings,
    hardware: str,
    fingerprint: dict[str, Any],
    items: Sequence[ItemResult],
    sweeps: Sequence[SweepFigures],
    complete: bool,
    trends: Sequence[Trend] = (),
) -> None:
    """JSON, Markdown (and the GitHub step summary when $GITHUB_STEP_SUMMARY is set), HTML, as asked; `trends` from the
    results history."""
    if settings.json is not None:
        write_json(settings.json, hardware, fingerprint, items, sweeps, complete)
    text = markdown(hardware, items, trends)
    if settings.markdown is not None:
        write_atomically(settings.markdown, text.encode())
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with Path(summary).open("a", encoding="utf-8") as out:
            out.write(text)
    if settings.html is not None:
        write_html(settings.html, hardware, fingerprint, items, sweeps, complete, trends)
