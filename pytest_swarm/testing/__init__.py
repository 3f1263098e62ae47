"""A fake box at the plugin's seam, for tests of the plugin and of what users build on it.

`pytest -p pytest_swarm.testing` measures every swarm item on a FakeBox whose servers all decode at 100 tokens a
second; a conftest's own `pytest_swarm_machine` returning a FakeBox (or a FakeBox passed to pytester as a plugin)
declares each spec's speed and faults. The marker, the kinds, the gate, the stores and the reports are the real
ones, so a whole item runs in milliseconds. docs/extend.md shows it.
"""

from __future__ import annotations

import pytest

from ..engines import registry
from ..report import json_report, text
from ..run import measuring
from .box import DEFAULT_SPEED, FakeBox, FakeGpus, FakePool, Faults

PRELOADED = (measuring, json_report, text, registry.engines())
"""The measuring and reporting path, and every installed engine, loaded here: pytester's in-process runs drop modules
imported inside a run (numpy and scipy cannot load twice), and the engines, found once, must keep the spec classes
every later run's specs are made of."""

__all__ = ["DEFAULT_SPEED", "FakeBox", "FakeGpus", "FakePool", "Faults", "pytest_swarm_machine"]


@pytest.hookimpl(trylast=True)
def pytest_swarm_machine(config: pytest.Config) -> FakeBox:
    """The default box, where no conftest or plugin declared one: every spec at DEFAULT_SPEED, no faults."""
    return FakeBox()
