"""The gate's side of a run: the stored baselines, read once, and the verdicts against them. It alone writes the
baselines YAML."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..gate.canary import with_canary
from ..gate.entries import BaselineFile, TestBaseline
from ..gate.verdict import baseline_entry
from ..results.item import ItemResult, ReferenceSide
from ..settings import PluginSettings
from ..specs import ServerSpec
from ..stores import baselines, runlog
from ..telemetry.hardware import HardwareProfile


class Judge:
    """The run's stored baselines, a file a profile: this runner's hardware, or a named server's own (a server someone
    else runs, `Server.endpoint(name=)`); and the recording of new entries."""

    def __init__(self, settings: PluginSettings, hardware: HardwareProfile, rootdir: Path) -> None:
        self.settings = settings
        self.hardware = hardware
        self.rootdir = rootdir
        self.baseline_path = settings.baseline_dir / f"{hardware.name}.yaml"
        self.baselines = baselines.load(self.baseline_path)  # a broken file stops the run before anything boots
        self._filed: dict[Path, BaselineFile | None] = {self.baseline_path: self.baselines}
        """Each file read so far, by path: a server's own is read when its first item is planned, before any boot."""
        self._written: dict[Path, None] = {}
        """The files this run recorded entries into, in the order first written."""
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

    @property
    def written(self) -> tuple[Path, ...]:
        """The baseline files this run recorded entries into."""
        return tuple(self._written)

    def _profile(self, server: ServerSpec) -> tuple[Path, str, Mapping[str, Any]]:
        """Where `server`'s entries are filed: the path, the profile's name and its fingerprint."""
        own = server.filed_under
        name, fingerprint = own if own is not None else (self.hardware.name, self.hardware.fingerprint)
        return self.settings.baseline_dir / f"{name}.yaml", name, fingerprint

    def entry(self, nodeid: str, server: ServerSpec) -> TestBaseline | None:
        """The item's stored entry; None where it has none, or where this run records it anew."""
        path = self._profile(server)[0]
        if path not in self._filed:
            self._filed[path] = baselines.load(path)
        filed = self._filed[path]
        if self.recording or filed is None:
            return None
        return filed.tests.get(nodeid)

    def stored(self, measured: ItemResult, canary: ReferenceSide | None = None) -> TestBaseline | None:
        """The entry to judge `measured` against: the stored one, or one recorded from it now and written before it
        is used."""
        if not self.recording:
            return self.entry(measured.nodeid, measured.server)
        origin = runlog.provenance(self.rootdir)
        recorded = {**origin, "engine_version": measured.server_info.get("engine_version")}
        new = baseline_entry(
            measured.result, measured.config.criteria, measured.server.describe(), recorded, measured.capacity
        )
        if canary is not None:
            gate = measured.config.criteria.gate
            new = with_canary(new, measured.result.rounds, canary.result.rounds, gate, canary.server.describe())
        path, name, fingerprint = self._profile(measured.server)
        self._filed.setdefault(path, None)
        baselines.update(path, name, fingerprint, origin, {measured.nodeid: new})
        self._written[path] = None
        return new
