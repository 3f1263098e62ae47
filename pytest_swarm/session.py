"""Session state: the server pool, the session's prompts, baselines, and every item's result."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import baselines
from .gate import GateOutcome, GateSettings, baseline_entry, evaluate
from .lock import default_lock_dir
from .marker import SwarmConfig
from .metrics import SwarmResult, relative_to, summarize
from .pool import LockSettings, ServerPool
from .prompts import ColdPrompts, resolve_prompts
from .records import RoundRecord
from .runner import TelemetrySettings, run_load
from .servers import LaunchSettings
from .spec import ServerSpec
from .telemetry import MemoryFigures, peak_memory


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
    incomplete: bool = False


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
    locks: LockSettings = field(default_factory=lambda: LockSettings(default_lock_dir()))
    telemetry: TelemetrySettings = field(default_factory=TelemetrySettings)
    prompts: ColdPrompts = field(default_factory=ColdPrompts)
    items: list[ItemResult] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.pool = ServerPool(self.settings, self.locks)
        self.baselines = baselines.load(self.baseline_settings.path)

    def measure(self, nodeid: str, test_key: str, config: SwarmConfig, level: int, boots: int) -> ItemResult:
        """On each of `boots` server boots (the first may reuse running servers): warm-up and rounds.

        Stops early when a round was aborted by the guard or a server died; what was
        measured is kept. Interrupted (Ctrl-C), it records what it has, marked
        incomplete, before the interrupt goes on.
        """
        base = resolve_prompts(config.workload.prompts, self.rootdir)
        load = config.load(level)
        rounds: list[RoundRecord] = []
        memory: list[MemoryFigures] = []
        info: dict[str, Any] = {}
        problem = None
        try:
            for boot in range(boots):
                servers = self.pool.get(config.server, load.workers, fresh=boot > 0)
                info = dict(servers[0].info)
                _, figures = run_load(
                    [s.endpoint for s in servers], config.workload, load, lambda n: self.prompts.take(base, n),
                    boot, self.telemetry if self.pool.pids() else None, self.pool.pids, rounds, [s.probe for s in servers],
                )
                memory += [figures] if figures is not None else []
                problem = self.pool.crash_report()
                if problem or (rounds and rounds[-1].aborted):
                    break
        except KeyboardInterrupt:
            if rounds:
                self._record(nodeid, test_key, config, info, rounds, memory, "interrupted: partial results", load.workers, incomplete=True)
            raise
        return self._record(nodeid, test_key, config, info, rounds, memory, problem, load.workers)

    def _record(
        self,
        nodeid: str,
        test_key: str,
        config: SwarmConfig,
        info: dict[str, Any],
        rounds: list[RoundRecord],
        memory: list[MemoryFigures],
        problem: str | None,
        workers: int,
        incomplete: bool = False,
    ) -> ItemResult:
        pinned = config.workload.max_tokens if config.workload.pinned else None
        result = summarize(rounds, pinned, workers)
        scalars = result.scalars()
        result = replace(
            relative_to(result, self.reference(test_key, config.server)),
            memory=peak_memory(memory),
            interactive=all(limit.holds(scalars.get(name)) for name, limit in config.interactive),
            aborted=problem or result.aborted,
        )
        item = ItemResult(nodeid, test_key, config.server, info, config, result, incomplete=incomplete)
        self.items.append(item)
        return item

    def reference(self, test_key: str, server: ServerSpec) -> SwarmResult | None:
        """The C=1 result of the same test on the same server, if one ran."""
        for item in self.items:
            if item.test_key == test_key and item.server == server and item.result.concurrency == 1 and item.result.workers == 1:
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
