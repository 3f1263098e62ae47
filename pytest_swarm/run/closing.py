"""The end of a run: the history appended, the reports written. It owns the results store, opened at the start so an
unreachable one stops the run before anything boots."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..gate.trends import Trend
from ..report.files import write_reports
from ..report.text import summary
from ..results.item import ItemResult
from ..results.run import RunReport
from ..results.sweeps import SweepFigures
from ..settings import PluginSettings
from ..stores import runlog
from ..stores.history import open_store
from ..telemetry.hardware import HardwareProfile


class Closing:
    """The run's results store and reports."""

    def __init__(self, settings: PluginSettings, hardware: HardwareProfile, rootdir: Path) -> None:
        self.settings = settings
        self.hardware = hardware
        self.rootdir = rootdir
        self.history = open_store(settings.history)
        self.history_problem: str | None = None
        """Why the run could not be stored, once it was tried; the plugin fails the run with it."""
        self.started_at = runlog.utc_now()

    def summary(
        self, items: Sequence[ItemResult], sweeps: list[SweepFigures], baseline_paths: Sequence[Path], verbose: bool
    ) -> list[tuple[str, bool]]:
        """The terminal's swarm section, each line with whether it is a warning."""
        return summary(self._report(items, sweeps, complete=True), self.settings, baseline_paths, verbose)

    def write(self, items: Sequence[ItemResult], sweeps: list[SweepFigures], complete: bool) -> None:
        """Append the run to the results store, then write the reports with its trends; a store that fails leaves
        `history_problem`."""
        trends: list[Trend] = []
        if self.history is not None:
            stored = runlog.run_record(
                list(items), self.hardware.name, runlog.provenance(self.rootdir), self.started_at, complete
            )
            trends, self.history_problem = runlog.finish(self.history, stored, list(items))
        write_reports(self.settings.reports, self._report(items, sweeps, complete, trends))

    def _report(
        self, items: Sequence[ItemResult], sweeps: list[SweepFigures], complete: bool, trends: Sequence[Trend] = ()
    ) -> RunReport:
        return RunReport(self.hardware.name, self.hardware.fingerprint, items, sweeps, complete, trends)
