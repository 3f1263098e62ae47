"""pytest hooks and fixtures for `@pytest.mark.swarm`; the measuring lives elsewhere.

Kept light at import: pytest loads this module in every run of every project that
has the plugin installed, so the engines, aiohttp and numpy load only when a swarm
item actually runs.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .marker import MARKER_HELP, SwarmConfig, parse_marker
from .spec import SpecError

if TYPE_CHECKING:
    from .metrics import SwarmResult
    from .session import SwarmSession

_CONFIG_KEY = pytest.StashKey[SwarmConfig]()
_SESSION_KEY = pytest.StashKey["SwarmSession"]()
_CONCURRENCY_ARG = "swarm_concurrency"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("swarm", "LLM-serving swarm measurements (pytest-swarm)")

    def add(option: str, ini: str, help: str, default: str | None = None) -> None:
        group.addoption(option, dest=ini, default=None, metavar=ini.split("_", 1)[1].upper(), help=f"{help} (ini: {ini})")
        parser.addini(ini, help, default=default)

    add("--swarm-json", "swarm_json", "write every swarm item's figures to this JSON file")
    add("--swarm-hardware", "swarm_hardware", "hardware profile name, or 'auto' to derive it", "auto")
    add("--swarm-llama-server", "swarm_llama_server", "llama-server executable to use instead of the xllamacpp wheel")
    add("--swarm-boot-timeout", "swarm_boot_timeout", "seconds a server may take to become ready", "180")


def _setting(config: pytest.Config, name: str) -> Any:
    value = config.getoption(name)
    return value if value is not None else config.getini(name)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)


def _hardware(config: pytest.Config) -> str:
    name = _setting(config, "swarm_hardware")
    if name != "auto":
        return str(name)
    from .hardware import detect

    return detect()


def _swarm_session(config: pytest.Config) -> SwarmSession:
    if _SESSION_KEY not in config.stash:
        from .servers import LaunchSettings
        from .session import SwarmSession

        try:
            boot_timeout = float(_setting(config, "swarm_boot_timeout"))
        except ValueError:
            raise pytest.UsageError("--swarm-boot-timeout / swarm_boot_timeout must be a number of seconds") from None
        settings = LaunchSettings(
            log_dir=Path(tempfile.mkdtemp(prefix="pytest-swarm-logs-")),
            boot_timeout_s=boot_timeout,
            llama_server=_setting(config, "swarm_llama_server") or None,
        )
        config.stash[_SESSION_KEY] = SwarmSession(settings, _hardware(config), config.rootpath)
    return config.stash[_SESSION_KEY]


def _parse(nodeid: str, marker: pytest.Mark) -> SwarmConfig:
    try:
        return parse_marker(marker.args, marker.kwargs)
    except SpecError as exc:
        raise pytest.Collector.CollectError(f"{nodeid}: @pytest.mark.swarm: {exc}") from None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("swarm")
    if marker is None:
        return
    config = _parse(metafunc.definition.nodeid, marker)
    if "swarm" not in metafunc.fixturenames:
        raise pytest.Collector.CollectError(
            f"{metafunc.definition.nodeid}: marked @pytest.mark.swarm but does not take the `swarm` fixture"
        )
    if config.parametrized:
        metafunc.parametrize(_CONCURRENCY_ARG, config.levels, ids=[f"c{c}" for c in config.levels])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group swarm items by server spec so each spec boots once, in first-seen order."""
    order: dict[Any, int] = {}
    for item in items:
        marker = item.get_closest_marker("swarm")
        if marker is not None and "swarm" in getattr(item, "fixturenames", ()):
            item.stash[_CONFIG_KEY] = parsed = _parse(item.nodeid, marker)
            order.setdefault(parsed.server, len(order))
    if len(order) > 1:
        items.sort(key=lambda it: order[it.stash[_CONFIG_KEY].server] if _CONFIG_KEY in it.stash else -1)


def pytest_report_header(config: pytest.Config) -> str:
    return f"swarm: hardware profile {_hardware(config)}"


class Swarm:
    """The `swarm` fixture: a runner bound to its item's marker and concurrency."""

    def __init__(self, session: SwarmSession, item: pytest.Item, config: SwarmConfig, concurrency: int) -> None:
        self._session = session
        self._item = item
        self.config = config
        self.concurrency = concurrency

    def run(self) -> SwarmResult:
        """Boot or reuse the server, warm up, run the measured rounds, return the figures."""
        params = getattr(self._item, "callspec", None)
        others = {k: v for k, v in params.params.items() if k != _CONCURRENCY_ARG} if params else {}
        test_key = self._item.nodeid.split("[", 1)[0] + (repr(sorted(others.items())) if others else "")
        return self._session.measure(self._item.nodeid, test_key, self.config, self.concurrency).result


def _config_of(node: pytest.Item) -> SwarmConfig:
    if _CONFIG_KEY not in node.stash:
        pytest.fail(f"{node.nodeid}: the swarm fixture needs @pytest.mark.swarm(...) on the test", pytrace=False)
    return node.stash[_CONFIG_KEY]


@pytest.fixture
def swarm_concurrency(request: pytest.FixtureRequest) -> int:
    """The item's concurrency; a list in the marker parametrizes this into c1, c2, ..."""
    return _config_of(request.node).levels[0]


@pytest.fixture
def swarm(request: pytest.FixtureRequest, swarm_concurrency: int) -> Swarm:
    """A runner bound to the item's marker: `swarm.run()` measures and returns the figures."""
    return Swarm(_swarm_session(request.config), request.node, _config_of(request.node), swarm_concurrency)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if _SESSION_KEY not in config.stash or not config.stash[_SESSION_KEY].items:
        return
    from .report import table, warnings_for

    session = config.stash[_SESSION_KEY]
    terminalreporter.write_sep("=", f"swarm figures ({session.hardware})")
    for line in table(session.items):
        terminalreporter.write_line(line)
    for line in warnings_for(session.items):
        terminalreporter.write_line(f"WARNING {line}", yellow=True)
    json_path = _setting(config, "swarm_json")
    if json_path:
        terminalreporter.write_line(f"swarm figures written to {json_path}")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write the JSON (also after failures) and stop the last server."""
    config = session.config
    if _SESSION_KEY not in config.stash:
        return
    swarm_session = config.stash[_SESSION_KEY]
    try:
        json_path = _setting(config, "swarm_json")
        if json_path and swarm_session.items:
            from .report import write_json

            write_json(Path(json_path), swarm_session.hardware, swarm_session.items)
    finally:
        swarm_session.close()


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SESSION_KEY in config.stash:
        config.stash[_SESSION_KEY].close()
