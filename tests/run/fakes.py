"""The fast tests' way into a measuring session on the fake box (pytest_swarm.testing), without pytest around it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_swarm.marker.parse import parse_marker
from pytest_swarm.results.item import ItemResult
from pytest_swarm.run.measuring import MeasuringSession
from pytest_swarm.settings import LaunchSettings, PluginSettings
from pytest_swarm.specs import PlannedItem
from pytest_swarm.telemetry.hardware import HardwareProfile
from pytest_swarm.testing import FakeBox

__all__ = ["FakeBox", "measure", "planned", "session"]


def session(
    box: FakeBox, tmp_path: Path, items: Sequence[PlannedItem], *, update_baselines: bool = False, **settings: Any
) -> MeasuringSession:
    """The run's measuring session of `items` on the box, its baselines in `tmp_path`, no history."""
    plugin = PluginSettings(
        LaunchSettings(log_dir=tmp_path / "logs"),
        baseline_dir=tmp_path,
        update_baselines=update_baselines,
        **settings,
    )
    return MeasuringSession(plugin, HardwareProfile("testbox", {}), tmp_path, items, box)


def planned(level: int, **marker: Any) -> PlannedItem:
    """A collected item of the marker at `level` agents, as the plugin plans it."""
    config = parse_marker((), marker)
    return PlannedItem("test_x.py::test_item", "test_x.py::test_item", config, level, config.load(level))


def measure(measuring: MeasuringSession, item: PlannedItem) -> ItemResult:
    """What the fixture and the runtest hooks do with an item: measure it, judge it, end it."""
    concluded = measuring.conclude(measuring.measure(item))
    measuring.ended(item.nodeid)
    return concluded
