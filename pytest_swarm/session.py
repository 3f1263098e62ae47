"""Session state: one live server at a time, the session's prompts, and every item's result.

Only one server runs at any moment, so no measurement ever shares the machine with
another spec's server; a spec that failed to boot is not booted again for each of
its items, they all report the same boot error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


class ServerPool:
    """Boots a spec on demand and keeps it until another spec is asked for."""

    def __init__(self, settings: LaunchSettings) -> None:
        self._settings = settings
        self._current: tuple[ServerSpec, RunningServer] | None = None
        self._failed: dict[ServerSpec, BootError] = {}

    def get(self, spec: ServerSpec) -> RunningServer:
        if spec in self._failed:
            raise self._failed[spec]
        if self._current is not None:
            if self._current[0] == spec:
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


@dataclass
class SwarmSession:
    settings: LaunchSettings
    hardware: str
    rootdir: Path
    prompts: ColdPrompts = field(default_factory=ColdPrompts)
    items: list[ItemResult] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.pool = ServerPool(self.settings)

    def measure(self, nodeid: str, test_key: str, config: SwarmConfig, concurrency: int) -> ItemResult:
        """Boot (or reuse) the server, run warm-up and rounds, and record the result."""
        base = resolve_prompts(config.workload.prompts, self.rootdir)
        server = self.pool.get(config.server)
        rounds = run_load(
            server.endpoint, config.workload, config.load(concurrency), lambda n: self.prompts.take(base, n)
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

    def close(self) -> None:
        self.pool.stop()
