"""The gate's side of a run: the stored baselines, read once, and the verdicts against them. It alone writes the
baselines YAML."""

from __future__ import annotations

from pathlib import Path

from ..gate.canary import with_canary
from ..gate.entries import TestBaseline
from ..gate.verdict import baseline_entry
from ..results.item import ItemResult, ReferenceSide
from ..settings import PluginSettings
from ..stores import baselines, runlog
from ..telemetry.hardware import HardwareProfile


class Judge:
    """The run's stored baselines for this hardware profile, and the recording of new entries."""

    def __init__(self, settings: PluginSettings, hardware: HardwareProfile, rootdir: Path) -> None:
        self.settings = settings
        self.hardware = hardware
        self.rootdir = rootdir
        self.baseline_path = settings.baseline_dir / f"{hardware.name}.yaml"
        self.baselines = baselines.load(self.baseline_path)  # a broken file stops the run before anything boots
        self.price_per_hour = (
            settings.price_per_hour
            if settings.price_per_hour is not None
            else (self.baselines.price_per_hour if self.baselines else None)
        )
        """What the runner costs an hour, for cost_per_mtok: the option's, else the baseline file's."""

    @property
    def recording(self) -> bool:
        """--swarm-update-baselines: every item checked against a stored baseline records its entry anew."""
        return self.settings.update_baselines

    def entry(self, nodeid: str) -> TestBaseline | None:
        """The item's stored entry; None where it has none, or where this run records it anew."""
        if self.recording or self.baselines is None:
            return None
        return self.baselines.tests.get(nodeid)

    def stored(self, measured: ItemResult, canary: ReferenceSide | None = None) -> TestBaseline | None:
        """The entry to judge `measured` against: the stored one, or one recorded from it now and written before it
        is used."""
        if not self.recording:
            return self.entry(measured.nodeid)
        origin = runlog.provenance(self.rootdir)
        recorded = {**origin, "engine_version": measured.server_info.get("engine_version")}
        new = baseline_entry(
            measured.result, measured.config.criteria, measured.server.describe(), recorded, measured.capacity
        )
        if canary is not None:
            gate = measured.config.criteria.gate
            new = with_canary(new, measured.result.rounds, canary.result.rounds, gate, canary.server.describe())
        baselines.update(
            self.baseline_path, self.hardware.name, self.hardware.fingerprint, origin, {measured.nodeid: new}
        )
        return new
