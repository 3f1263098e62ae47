"""Session state: one live server at a time, the session's prompts, and every item's result.

Only one server runs at any moment, so no measurement ever shares the machine with
another spec's server; a spec that failed to boot is not booted again for each of
its items, they all report the same boot error.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import baselines
from .gate import GateOutcome, GateSettings, baseline_entry, evaluate
from .marker import SwarmConfig
from .metrics import SwarmResult, relative_to, summarize
from .prompts import ColdPrompts, resolve_prompts
from .runner import run_load
from .servers import BootError, LaunchSettings, RunningServer, launch
from .spec import ServerSpec


@dataclass
class ItemResult:
    """What one item measured, kept even when the test's own asserts fail afterwards."""

    nodeid: str
    test_key: str
    server: ServerSpec
    server_info: dict[str, Any]
    config: SwarmConfig
    result: SwarmResult
    outcome: GateOutcome | None = None


class ServerPool:
    """Boots a spec on demand and keeps it until another spec is asked for."""

    def __init__(self, settings: LaunchSettings) -> None:
        self._settings = settings
        self._current: tuple[ServerSpec, RunningServer] | None = None
        self._failed: dict[ServerSpec, BootError] = {}

    def get(self, spec: ServerSpec, fresh: bool = False) -> RunningServer:
        """The running server of `spec`; `fresh` forces a new boot (an independent sample)."""
        if spec in self._failed:
            raise self._failed[spec]
        if self._current is not None:
            if self._current[0] == spec and not fresh:
                return self._current[1]
            self.stop()
        try:
            server = launch(spec, self._settings)
        except BootError as exc:
            self._failed[spec] = exc
            raise
        self._current = (spec, server)
        return server

    def stop(self) -> None:
        if self._current is not None:
            _, server = self._current
            self._current = None
            server.stop()


@dataclass(frozen=True)
class BaselineSettings:
    """Where baselines live for this run and what to do with them."""

    path: Path
    update: bool = False
    gate: GateSettings = GateSettings()


@dataclass
class SwarmSession:
    settings: LaunchSettings
    baseline_settings: BaselineSettings
    hardware: str
    fingerprint: dict[str, Any]
    rootdir: Path
    prompts: ColdPrompts = field(default_factory=ColdPrompts)
    items: list[ItemResult] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.pool = ServerPool(self.settings)
        self.baselines = baselines.load(self.baseline_settings.path)

    def measure(self, nodeid: str, test_key: str, config: SwarmConfig, concurrency: int, boots: int) -> ItemResult:
        """On each of `boots` server boots (the first may reuse a running one): warm-up and rounds."""
        base = resolve_prompts(config.workload.prompts, self.rootdir)
        rounds = []
        for boot in range(boots):
            server = self.pool.get(config.server, fresh=boot > 0)
            rounds += run_load(
                server.endpoint, config.workload, config.load(concurrency), lambda n: self.prompts.take(base, n), boot
            )
        pinned = config.workload.max_tokens if config.workload.pinned else None
        result = relative_to(summarize(rounds, pinned), self.reference(test_key, config.server))
        item = ItemResult(nodeid, test_key, config.server, dict(server.info), config, result)
        self.items.append(item)
        return item

    def reference(self, test_key: str, server: ServerSpec) -> SwarmResult | None:
        """The C=1 result of the same test on the same server, if one ran."""
        for item in self.items:
            if item.test_key == test_key and item.server == server and item.result.concurrency == 1:
                return item.result
        return None

    def conclude(self, nodeid: str) -> ItemResult | None:
        """Gate the item's last measurement against its baseline, or record it as the new one."""
        item = next((i for i in reversed(self.items) if i.nodeid == nodeid), None)
        if item is None:
            return None
        entry = self.baselines.tests.get(nodeid) if self.baselines else None
        if self.baseline_settings.update:
            origin = provenance(self.rootdir)
            recorded = {**origin, "engine_version": item.server_info.get("engine_version")}
            new = baseline_entry(item.result, item.config, item.server.describe(), recorded)
            baselines.update(self.baseline_settings.path, self.hardware, self.fingerprint, origin, {nodeid: new})
            entry = new
        item.outcome = evaluate(item.result, item.config, entry, self.baseline_settings.gate)
        return item

    def close(self) -> None:
        self.pool.stop()


def provenance(rootdir: Path) -> dict[str, Any]:
    """When and by what a baseline was recorded: date, plugin version, git commit if any."""
    from . import __version__

    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=rootdir, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {"date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "plugin_version": __version__, "git_commit": commit}
