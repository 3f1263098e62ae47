"""The plugin's hooks: what a team's conftest.py, or a plugin of its own, implements to add to every swarm item
without editing pytest_swarm.

Registered at start-up (plugin.py's `pytest_addhooks`), so a misspelt hook or argument is an error, not a no-op.
Implementations take any subset of the arguments, by name.

    # conftest.py
    def pytest_swarm_figures(item, figures, rounds):
        answers = [r for round_ in rounds for r in round_.requests if r.ok]
        return {"long_answers": sum(r.output_tokens > 100 for r in answers) / len(answers)}"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .core.records import RoundRecord
    from .figures.summary import ItemFigures
    from .results.item import ItemResult
    from .run.machine import Machine


@pytest.hookspec
def pytest_swarm_figures(
    item: pytest.Item, figures: ItemFigures, rounds: Sequence[RoundRecord]
) -> Mapping[str, float] | None:
    """Figures of your own for a measured item: a name for each, and its value (a number).

    Called once an item is measured, before the test body's own asserts and before the gate, with the plugin's
    figures and the measured rounds (`round.requests`: every request as the client saw it, failed ones included) of
    the item's server (not an A/B reference's or a canary's). `swarm.run()` returns them in `figures.facets.added`; the
    JSON report holds them under the item's `figures.added`, the results history under their own names, and the
    terminal a line under its table. A name the plugin already uses, one two implementations both return, or a value
    that is not a finite number fails the item, naming the figure. Return None to add nothing.
    """


@pytest.hookspec
def pytest_swarm_report(config: pytest.Config, results: Sequence[ItemResult]) -> Sequence[str] | None:
    """Lines of your own for the terminal's swarm section, printed after the plugin's own (its table, warnings and
    notes), once per run with every measured item as judged. Return None to add nothing."""


@pytest.hookspec(firstresult=True)
def pytest_swarm_machine(config: pytest.Config) -> Machine | None:
    """The machine to measure on instead of this one: its servers, its players and its GPUs (run/machine.py).

    pytest_swarm.testing implements it with a fake box whose servers have the speeds and faults a test declares, so a
    test of an engine, a figure or a report of your own runs whole items (the marker, the gate, the stores, the reports
    are the real ones) in milliseconds: `pytest -p pytest_swarm.testing`, or a FakeBox passed as a plugin. The first
    implementation to return one wins; return None to measure on this machine.
    """
