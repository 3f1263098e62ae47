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

    Called once the item is measured, before the test's asserts and the gate, with the plugin's figures and the
    rounds of the item's own server (failed requests included). They land in `figures.facets.added`, the JSON report
    and the history. A name the plugin uses, one two implementations return, or a non-finite value fails the item.
    Return None to add nothing."""


@pytest.hookspec
def pytest_swarm_report(config: pytest.Config, results: Sequence[ItemResult]) -> Sequence[str] | None:
    """Lines of your own for the terminal's swarm section, after the plugin's, once per run. Return None to add
    nothing."""


@pytest.hookspec(firstresult=True)
def pytest_swarm_machine(config: pytest.Config) -> Machine | None:
    """The machine to measure on instead of this one (run/machine.py); pytest_swarm.testing returns a fake box. The
    first implementation to return one wins; None measures here."""
