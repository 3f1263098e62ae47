"""The `swarm` fixture: a runner bound to its item's resolved marker, level and load.

Light at import: the measuring machinery comes with the session, made only when swarm items were collected."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import pytest

from .specs import MarkerConfig, PlannedItem

if TYPE_CHECKING:
    from .core.records import RoundRecord
    from .figures.summary import ItemFigures
    from .results.item import ItemResult
    from .run.measuring import MeasuringSession

ITEM_KEY = pytest.StashKey[PlannedItem]()
"""An item's experiment, planned once at collection."""
MARKER_ERROR_KEY = pytest.StashKey[str]()
"""Why an item's marker is wrong: the item fails at setup with it, the other items of its file still run."""
UNPLACED_KEY = pytest.StashKey[str]()
"""Why no server of the item's Server.pick fits this hardware profile: the item skips with it."""
RESULT_KEY: pytest.StashKey[ItemResult] = pytest.StashKey()
"""What the item measured, from the fixture to the gate in the runtest wrapper."""
SESSION_KEY: pytest.StashKey[MeasuringSession] = pytest.StashKey()


class Swarm:
    """What a test gets as `swarm`: `swarm.run()` measures and returns the figures. For an A/B item `run()` returns
    the candidate's figures and `swarm.reference` holds the reference's."""

    def __init__(self, session: MeasuringSession, node: pytest.Item, item: PlannedItem) -> None:
        self._session = session
        self._node = node
        self.item = item
        self.reference: ItemFigures | None = None
        """The A/B reference's figures once `run()` measured them; None for an item without `reference=`."""
        self.capacity: float | None = None
        """A capacity item's capacity (agents, workers or requests a second) once `run()` searched for it; None where
        the condition held at no level, or for other items."""

    @property
    def config(self) -> MarkerConfig:
        return self.item.config

    @property
    def level(self) -> float:
        """The swept level: agents (c), workers (w) or requests per second (r)."""
        return self.item.level

    @property
    def concurrency(self) -> int:
        """Agents per server."""
        return self.item.load.concurrency

    @property
    def workers(self) -> int:
        """Servers: one in request mode, `level` in process mode."""
        return self.item.load.workers

    def run(self) -> ItemFigures:
        """Boot or reuse the server, warm up, run the measured rounds; return the figures.

        A missing engine skips the item (fails it under --swarm-require-engines). The baseline gate runs after the
        test body, so the test's own asserts come first."""
        session = self._session
        missing = session.missing_engine(self.item)  # the server's, the reference's, or the canary's that will run
        if missing is not None:
            if session.settings.launch.require_engines:
                pytest.fail(f"{missing} (--swarm-require-engines: a missing engine fails the item)", pytrace=False)
            pytest.skip(missing)
        from .core.errors import AddedFigureError, DescriptorLimit, RequestsBeyondContext, TokenizeFailed
        from .figures.added import added_figures

        node = self._node

        def add_figures(figures: ItemFigures, rounds: Sequence[RoundRecord]) -> dict[str, float]:
            returned = node.config.hook.pytest_swarm_figures(item=node, figures=figures, rounds=rounds)
            return added_figures(returned, figures.scalars())

        try:
            measured = session.measure(self.item, _progress(node.config), add_figures)
        except AddedFigureError as exc:
            pytest.fail(str(exc), pytrace=False)
        except (RequestsBeyondContext, DescriptorLimit) as exc:
            pytest.fail(f"refused before the round: {exc}", pytrace=False)
        except TokenizeFailed as exc:
            pytest.fail(f"the server's tokens could not be counted before the round: {exc}", pytrace=False)
        self._node.stash[RESULT_KEY] = measured
        self.reference = measured.reference.result if measured.reference is not None else None
        self.capacity = measured.capacity.capacity if measured.capacity is not None else None
        if measured.problem:
            pytest.fail(measured.problem, pytrace=False)
        benchmark = getattr(self._node, "funcargs", {}).get("benchmark")
        if benchmark is not None:
            from .report.benchmark import feed  # here: only a test that also takes pytest-benchmark's fixture needs it

            feed(benchmark, measured.result)
        return measured.result


def _progress(config: pytest.Config) -> Callable[[str], None] | None:
    """Under -v, a line per measured round on the terminal, past pytest's output capture; nothing otherwise."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or config.get_verbosity() <= 0:
        return None

    def say(line: str) -> None:
        if capture is None:
            reporter.write_line(line)
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)

    return say


def _planned(node: pytest.Item) -> PlannedItem:
    if ITEM_KEY not in node.stash:
        pytest.fail(f"{node.nodeid}: the swarm fixture needs @pytest.mark.swarm(...) on the test", pytrace=False)
    return node.stash[ITEM_KEY]


@pytest.fixture
def swarm_level(request: pytest.FixtureRequest) -> float:
    """The item's concurrency, workers (process mode) or rate (open loop); a list in the marker parametrizes it into
    c1, c2, ... (w1, r0.5, ...)."""
    return _planned(request.node).level


@pytest.fixture
def swarm(request: pytest.FixtureRequest, swarm_level: float) -> Swarm:
    """A runner bound to the item's marker: `swarm.run()` measures and returns the figures."""
    item = _planned(request.node)
    return Swarm(request.config.stash[SESSION_KEY], request.node, item)
