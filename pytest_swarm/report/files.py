"""The report files a run asked for, written at its end: also after failures and interrupts, never half written."""

from __future__ import annotations

import os
from pathlib import Path

from .._util.atomic import write_atomically
from ..results.run import RunReport
from ..settings import ReportSettings
from .html import write_html
from .json_report import write_json
from .text import markdown


def write_reports(settings: ReportSettings, run: RunReport) -> None:
    """JSON, Markdown (and the GitHub step summary when $GITHUB_STEP_SUMMARY is set), HTML, as asked; `trends` from the
    results history."""
    if settings.json is not None:
        write_json(settings.json, run)
    text = markdown(run)
    if settings.markdown is not None:
        write_atomically(settings.markdown, text.encode())
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with Path(summary).open("a", encoding="utf-8") as out:
            out.write(text)
    if settings.html is not None:
        write_html(settings.html, run)
