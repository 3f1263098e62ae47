"""The results history through pytest itself: checked at the start, written at the end, its credentials shown nowhere.

The start checks need no engine (the store is opened before anything boots); the runs that store figures measure on
the fake box (pytest_swarm.testing), and the fleet case writes to a real PostgreSQL (tests/postgres.py).
"""

from __future__ import annotations

import json
import os
import sqlite3
from urllib.parse import quote

import psycopg
import pytest

from pytest_swarm.report import html
from pytest_swarm.stores.history import TABLES
from pytest_swarm.testing import FakeBox
from tests import postgres

PRELOADED = (html,)
"""The HTML report's charts (matplotlib), loaded before pytester's in-process runs, which drop what they import."""

HW = "--swarm-hardware=testbox"
SUITE = """
import os
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server=Server.llamacpp(slots=1), concurrency=1, max_tokens=4, rounds=1, prompts_per_agent=2)
def test_stored(swarm):
    swarm.run()
    broken = os.environ.get("BREAK_HISTORY")
    if broken:  # the store goes away while the run measures: its end must say so, and still write the reports
        os.remove(broken)
        os.mkdir(broken)
"""


def _suite(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_stored=SUITE)


def test_an_unreachable_server_stops_the_run_naming_it_without_the_password(pytester: pytest.Pytester) -> None:
    _suite(pytester)
    pytester.makeini("[pytest]\nswarm_history = postgresql://fleet:Hunter2-secret@127.0.0.1:1/runs\n")
    result = pytester.runpytest(HW)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*history store postgresql://fleet:***@127.0.0.1:1/runs: cannot connect*"])
    assert "Hunter2-secret" not in result.stdout.str() + result.stderr.str()


def test_collect_only_opens_no_store(pytester: pytest.Pytester) -> None:
    """Nothing is measured, so nothing is stored: the default store is not even created (opening it would make the file)."""
    _suite(pytester)
    result = pytester.runpytest(HW, "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["test_stored.py::test_stored"])
    assert not (pytester.path / "baselines" / "history.sqlite").exists()


def test_the_option_and_ini_resolve_the_store_and_the_header_shows_it_redacted(pytester: pytest.Pytester) -> None:
    """A path is made absolute under the rootdir, a URL kept as given (never shown whole), 'off' turns it off; the default sits by the baselines."""
    from pytest_swarm.plugin import SETTINGS_KEY, pytest_report_header

    pytester.makeini("[pytest]\nswarm_history = postgresql://fleet:Hunter2-secret@db.example/runs\n")
    config = pytester.parseconfigure(HW)
    assert config.stash[SETTINGS_KEY].history == "postgresql://fleet:Hunter2-secret@db.example/runs"
    assert "Hunter2-secret" not in repr(config.stash[SETTINGS_KEY])
    header = pytest_report_header(config)
    assert "swarm: results history postgresql://fleet:***@db.example/runs" in header and "Hunter2-secret" not in repr(
        header
    )
    for option, expected in (
        ("--swarm-history=off", None),
        ("--swarm-history=runs/h.sqlite", str(pytester.path / "runs" / "h.sqlite")),
        ("--swarm-baseline-dir=perf", str(pytester.path / "perf" / "history.sqlite")),
    ):
        pytester.makeini("[pytest]\n")
        assert pytester.parseconfigure(HW, option).stash[SETTINGS_KEY].history == expected, option


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(HW, "-p", "no:cacheprovider", *args, plugins=[FakeBox()])


def test_runs_append_to_the_default_store_the_report_draws_the_trend_and_a_lost_store_fails_the_run(
    pytester: pytest.Pytester,
) -> None:
    _suite(pytester)
    store = pytester.path / "baselines" / "history.sqlite"
    _run(pytester).assert_outcomes(passed=1)
    result = _run(pytester, "--swarm-html=report.html", "--swarm-markdown=summary.md")
    result.assert_outcomes(passed=1)
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT COUNT(*), MIN(hardware), MAX(complete) FROM swarm_runs").fetchone() == (
            2,
            "testbox",
            1,
        )
        ((nodeid, engine),) = db.execute("SELECT DISTINCT nodeid, engine_version FROM swarm_items").fetchall()
        assert nodeid == "test_stored.py::test_stored" and engine == "fake box (llamacpp)"
        assert db.execute(
            "SELECT COUNT(*) FROM swarm_figures WHERE figure = 'effective_tps' AND value > 0"
        ).fetchone() == (2,)
    html = (pytester.path / "report.html").read_text()
    assert 'data-chart="trend-effective_tps"' in html and "effective_tps over the stored runs" in html

    os.environ["BREAK_HISTORY"] = str(store)
    try:
        broken = _run(pytester, "--swarm-json=out.json")
    finally:
        del os.environ["BREAK_HISTORY"]
    assert broken.ret == pytest.ExitCode.TESTS_FAILED
    broken.stdout.fnmatch_lines([f"swarm: results not stored: history store {store}: cannot connect*"])
    assert json.loads((pytester.path / "out.json").read_text())["tests"][0]["nodeid"] == "test_stored.py::test_stored"


def test_a_fleet_store_on_postgresql_gets_the_run_and_its_password_appears_nowhere(
    pytester: pytest.Pytester, postgres_url: str
) -> None:
    _suite(pytester)
    result = _run(
        pytester, f"--swarm-history={postgres_url}", "--swarm-json=out.json", "--swarm-markdown=summary.md", "-v"
    )
    result.assert_outcomes(passed=1)
    shown = result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["swarm: results history postgresql://swarm:***@127.0.0.1:*"])
    written = "".join(
        p.read_text() for p in pytester.path.rglob("*") if p.is_file() and p.suffix in (".json", ".md", ".log", ".txt")
    )
    with psycopg.connect(postgres_url) as db:
        stored = repr([db.execute(f"SELECT * FROM {table}").fetchall() for table in TABLES])
        assert db.execute("SELECT COUNT(*) FROM swarm_runs").fetchone() == (1,)
    for secret in (postgres.PASSWORD, quote(postgres.PASSWORD, safe="")):
        assert secret not in shown and secret not in written and secret not in stored
