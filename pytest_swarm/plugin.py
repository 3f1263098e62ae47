"""pytest hooks for `@pytest.mark.swarm`. Light at import, since every pytest run with the plugin installed loads it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from ._util.credentials import redact
from ._util.open_files import Raised, raise_soft_limit
from ._util.sigterm import stop_on_sigterm
from .fixture import ITEM_KEY, MARKER_ERROR_KEY, RESULT_KEY, SESSION_KEY, UNPLACED_KEY, swarm, swarm_level
from .marker.parse import check_endpoint, parse_marker, with_endpoint_model
from .marker.table import MARKER_HELP
from .settings import PluginSettings, add_options, read_settings
from .specs import MarkerConfig, NoServerForHardware, PlannedItem, SpecError
from .telemetry.hardware import HardwareProfile

__all__ = ["swarm", "swarm_level"]  # the fixtures: pytest finds them in this module's namespace

SETTINGS_KEY = pytest.StashKey[PluginSettings]()
PROFILE_KEY = pytest.StashKey[HardwareProfile]()
DESCRIPTORS_KEY = pytest.StashKey[Raised]()
"""The open-file limit as the session's start raised it: every stream holds a socket, and a soft limit of 1,024 would
cap a swarm near a thousand streams."""
MARKERS_KEY = pytest.StashKey[dict[tuple[str, str], "MarkerConfig | str | NoServerForHardware"]]()
"""Each swarm test function's marker, parsed once (or why not), keyed by the function every parametrized item shares."""
LEVEL_ARG = "swarm_level"


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """The hooks a conftest implements to add figures or report lines (hookspecs.py)."""
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    config.stash[SETTINGS_KEY] = settings = read_settings(config)
    config.stash[MARKERS_KEY] = {}
    config.stash[DESCRIPTORS_KEY] = raise_soft_limit()  # first: the servers and load generators inherit it
    problem = check_endpoint(settings)
    if problem is not None:
        raise pytest.UsageError(problem)
    if settings.reports.html is not None:
        from .report.html import missing_dependency  # here: only a run that asks for HTML pays for the report modules

        problem = missing_dependency()  # now, not after an hour of measuring
        if problem:
            raise pytest.UsageError(problem)
    stop_on_sigterm(config.add_cleanup)


def _profile(config: pytest.Config) -> HardwareProfile:
    if PROFILE_KEY not in config.stash:
        config.stash[PROFILE_KEY] = HardwareProfile.detect(config.stash[SETTINGS_KEY].hardware)
    return config.stash[PROFILE_KEY]


def pytest_report_header(config: pytest.Config) -> list[str]:
    lines = _profile(config).header()
    raised = config.stash.get(DESCRIPTORS_KEY, None)
    if raised is not None:
        lines.append(raised.header())
    endpoint = config.stash[SETTINGS_KEY].endpoint
    if endpoint is not None:
        lines.append(f"swarm: measuring {endpoint.url} ({endpoint.protocol}); no server is booted")
    history = config.stash[SETTINGS_KEY].history
    lines.append(f"swarm: results history {'off' if history is None else redact(history)}")
    return lines


def pytest_sessionstart(session: pytest.Session) -> None:
    """With --swarm-endpoint and no --swarm-model, ask the server which model it serves: before collection, so the
    markers get it."""
    config = session.config
    try:
        config.stash[SETTINGS_KEY] = with_endpoint_model(config.stash[SETTINGS_KEY])
    except SpecError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parse the marker once per test function; a list of levels parametrizes it (c1, c2, ... or w1, w2, ...)."""
    marker = metafunc.definition.get_closest_marker("swarm")
    if marker is None:
        return
    config = metafunc.config
    try:
        parsed: MarkerConfig | str | NoServerForHardware = parse_marker(
            marker.args, marker.kwargs, config.stash[SETTINGS_KEY], config.rootpath, _profile(config).name
        )
    except NoServerForHardware as exc:
        parsed = exc
    except SpecError as exc:
        parsed = f"@pytest.mark.swarm: {exc}"
    if isinstance(parsed, MarkerConfig) and "swarm" not in metafunc.fixturenames:
        parsed = "marked @pytest.mark.swarm but does not take the `swarm` fixture"
    config.stash[MARKERS_KEY][_function(metafunc.definition)] = parsed
    levels = parsed.config if isinstance(parsed, NoServerForHardware) else parsed
    if isinstance(levels, MarkerConfig) and levels.parametrized:
        metafunc.parametrize(LEVEL_ARG, levels.levels, ids=[levels.level_id(n) for n in levels.levels])


def _function(node: pytest.Item) -> tuple[str, str]:
    """The test function an item comes from: its module's or class's node id and the function's name."""
    parent = node.parent.nodeid if node.parent is not None else ""
    return parent, getattr(node, "originalname", node.name)


def _plan(node: pytest.Item, config: MarkerConfig) -> PlannedItem:
    """The item's experiment, derived once; its sweep is its function and other parameters, each combination on its
    own."""
    callspec = getattr(node, "callspec", None)
    params = dict(callspec.params) if callspec is not None else {}
    level = params.pop(LEVEL_ARG, config.levels[0])
    parent, name = _function(node)
    test_key = f"{parent}::{name}" + (repr(sorted(params.items())) if params else "")
    return PlannedItem(node.nodeid, test_key, config, level, config.load(level))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Plan every swarm item; then group them by server spec so each spec boots once, in first-seen order."""
    markers = config.stash[MARKERS_KEY]
    order: dict[Any, int] = {}
    for node in items:
        parsed = markers.get(_function(node))
        if isinstance(parsed, str):
            node.stash[MARKER_ERROR_KEY] = parsed
        elif isinstance(parsed, NoServerForHardware):
            node.stash[UNPLACED_KEY] = str(parsed)
        elif parsed is not None:
            node.stash[ITEM_KEY] = planned = _plan(node, parsed)
            order.setdefault(planned.config.server, len(order))
    if len(order) > 1:
        items.sort(key=lambda node: order[node.stash[ITEM_KEY].config.server] if ITEM_KEY in node.stash else -1)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the swarm session (reading the baselines) before anything runs: a broken file stops the run with file, line
    and key."""
    config = session.config
    selected = [node.stash[ITEM_KEY] for node in session.items if ITEM_KEY in node.stash]
    if not selected:
        return
    from .core.errors import BaselineError, BuildError, HistoryError, SpecError
    from .run.machine import THIS_MACHINE
    from .run.measuring import MeasuringSession

    settings = config.stash[SETTINGS_KEY]
    if config.option.collectonly:
        settings = replace(
            settings, history=None
        )  # nothing is measured, so nothing is stored: a read-only checkout still collects
    machine = config.hook.pytest_swarm_machine(config=config) or THIS_MACHINE  # a fake box, where a plugin gives one
    try:
        config.stash[SESSION_KEY] = swarm_session = MeasuringSession(
            settings, _profile(config), config.rootpath, selected, machine
        )
    except (BaselineError, HistoryError) as exc:
        raise pytest.UsageError(str(exc)) from None
    if not config.option.collectonly:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        try:
            swarm_session.prepare(selected, reporter.write_line if reporter is not None else print)
        except (SpecError, BuildError) as exc:
            raise pytest.UsageError(str(exc)) from None


XDIST_REFUSAL = (
    "pytest-xdist runs tests in several processes at once: a sweep's levels would land on different workers "
    "and two swarm items would measure on one machine together, each reading the other's load as its server's. "
    "Run swarm items without it (-p no:xdist, or -n 0), or deselect them from the parallel run (-m 'not swarm')"
)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if MARKER_ERROR_KEY in item.stash:
        pytest.fail(f"{item.nodeid}: {item.stash[MARKER_ERROR_KEY]}", pytrace=False)
    if ITEM_KEY in item.stash and hasattr(item.config, "workerinput"):
        pytest.fail(f"{item.nodeid}: {XDIST_REFUSAL}", pytrace=False)
    if UNPLACED_KEY in item.stash:
        if item.config.stash[SETTINGS_KEY].launch.require_engines:
            pytest.fail(
                f"{item.stash[UNPLACED_KEY]} (--swarm-require-engines: an item with no server here fails)",
                pytrace=False,
            )
        pytest.skip(item.stash[UNPLACED_KEY])


def _conclude(item: pytest.Item) -> str | None:
    """Gate the item's measurement (or record its baseline); the failure message when it must fail."""
    if RESULT_KEY not in item.stash:
        return None
    swarm_session = item.config.stash[SESSION_KEY]
    measured = item.stash[RESULT_KEY] = swarm_session.conclude(item.stash[RESULT_KEY])
    outcome = measured.outcome
    if outcome is None:
        return None
    item.user_properties.append(("swarm.verdict", outcome.verdict.value))
    item.user_properties.extend((f"swarm.{name}", value) for name, value in measured.result.scalars().items())
    if not outcome.fails(swarm_session.settings.gate.strict):
        return None
    from .report.verdict import verdict_message

    return verdict_message(measured)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    try:
        result = yield
    except BaseException:
        _conclude(item)  # record the verdict; the test's own failure is the one to show
        raise
    message = _conclude(item)
    if message:
        pytest.fail(message, pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    """After an item ended, tell its sweep. An interrupted item never ended: its sweep stays incomplete."""
    result = yield
    if ITEM_KEY in item.stash and SESSION_KEY in item.config.stash:
        item.config.stash[SESSION_KEY].ended(item.nodeid)
    return result


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if SESSION_KEY not in config.stash or not config.stash[SESSION_KEY].items:
        return
    swarm_session = config.stash[SESSION_KEY]
    terminalreporter.write_sep("=", f"swarm figures ({swarm_session.hardware.name})")
    for line, warning in swarm_session.summary(verbose=config.get_verbosity() > 0):
        terminalreporter.write_line(line, yellow=warning)
    for lines in config.hook.pytest_swarm_report(config=config, results=tuple(swarm_session.items)):
        for line in lines:
            terminalreporter.write_line(str(line))
    if swarm_session.closing.history_problem:
        terminalreporter.write_line(f"swarm: results not stored: {swarm_session.closing.history_problem}", red=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write the reports and the history, even after failures and interrupts, and stop the last server. A history
    that could not be written fails the run."""
    config = session.config
    if SESSION_KEY not in config.stash:
        return
    swarm_session = config.stash[SESSION_KEY]
    try:
        swarm_session.close()
    finally:
        if swarm_session.items:
            swarm_session.write_reports(complete=exitstatus != pytest.ExitCode.INTERRUPTED)
            if swarm_session.closing.history_problem and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    if SESSION_KEY in config.stash:
        config.stash[SESSION_KEY].close()
