"""The plugin's hooks (hookspecs.py) implemented in a project's conftest.py, with no edit to pytest_swarm: a
figure of its own for every swarm item, checked and carried into the returned figures, the JSON report, the terminal
and the history; lines of its own in the terminal's swarm section; a bad figure fails its item naming it. The items
measure on the fake box (pytest_swarm.testing): the hooks' path is the plugin's own, whatever serves the rounds."""

from __future__ import annotations

import json
import sqlite3

import pytest

from pytest_swarm.testing import FakeBox

SUITE = """
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server=Server.llamacpp(slots=2), concurrency=2, max_tokens=8, rounds=2)
def test_agents(swarm):
    figures = swarm.run()
    assert figures.facets.added == {"answers_of_8": 1.0, "rounds_seen": 2.0}
"""

CONFTEST = """
def pytest_swarm_figures(item, figures, rounds):
    answers = [r for round_ in rounds for r in round_.requests if r.ok]
    return {"answers_of_8": sum(r.output_tokens == 8 for r in answers) / len(answers), "rounds_seen": len(rounds)}

def pytest_swarm_report(results):
    return [f"team report: {r.nodeid.rsplit('::', 1)[-1]} made {r.result.output_tokens} tokens" for r in results]
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("--swarm-hardware=testbox", "-p", "no:cacheprovider", *args, plugins=[FakeBox()])


def test_a_conftest_adds_a_figure_and_a_report_section(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_team=SUITE)
    pytester.makeconftest(CONFTEST)
    result = _run(pytester, "--swarm-json=out.json", "--swarm-history=h.db")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*test_agents: added figures: answers_of_8 1, rounds_seen 2", "team report: test_agents made 32 tokens"]
    )
    (test,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    assert test["figures"]["added"] == {"answers_of_8": 1.0, "rounds_seen": 2.0}
    with sqlite3.connect(pytester.path / "h.db") as db:
        names = {row[0] for row in db.execute("SELECT DISTINCT figure FROM swarm_figures")}
    assert {"answers_of_8", "rounds_seen"} <= names, names


@pytest.mark.parametrize(
    ("returned", "error"),
    [
        ('{"ttft.p95": 1.0}', "'ttft.p95' is one of the plugin's own figures"),
        ('{"share": float("nan")}', "'share' is nan, not a finite number"),
        ('["share"]', "returns a mapping of figure names to numbers, got list"),
    ],
    ids=["taken-name", "not-finite", "not-a-mapping"],
)
def test_a_bad_added_figure_fails_its_item_naming_it(pytester: pytest.Pytester, returned: str, error: str) -> None:
    pytester.makepyfile(test_team=SUITE)
    pytester.makeconftest(f"def pytest_swarm_figures(figures):\n    return {returned}\n")
    result = _run(pytester, "--swarm-history=off")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*pytest_swarm_figures*{error}*"])


def test_a_misspelt_hook_argument_is_an_error_at_start_up(pytester: pytest.Pytester) -> None:
    """At start-up pytest checks an implementation against the hookspec: a wrong argument name never silently adds nothing."""
    pytester.makepyfile(test_team=SUITE)
    pytester.makeconftest("def pytest_swarm_figures(item, figure):\n    return {}\n")
    result = _run(pytester, "--swarm-history=off")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*pytest_swarm_figures*figure*"])
