"""`python -m pytest_swarm compare A.json B.json`: two saved runs of the same items on the fake box, one server slower
in the second; the gate's own test flags that item and not the other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_swarm import Server
from pytest_swarm.__main__ import main
from pytest_swarm.stores.history import HistoryStore
from pytest_swarm.testing import FakeBox

SUITE = """
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server=Server.llamacpp(slots=2), concurrency=2, max_tokens=16, rounds=6)
def test_two_slots(swarm):
    swarm.run()

@pytest.mark.swarm(server=Server.llamacpp(slots=4), concurrency=2, max_tokens=16, rounds=6)
def test_four_slots(swarm):
    swarm.run()
"""


def _saved(pytester: pytest.Pytester, box: FakeBox, name: str, *args: str) -> Path:
    out = pytester.path / name
    result = pytester.runpytest(
        "--swarm-hardware=testbox", "-p", "no:cacheprovider", f"--swarm-json={out}", *args, plugins=[box]
    )
    result.assert_outcomes(passed=2)
    return out


def _compare(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, pytest.LineMatcher, pytest.LineMatcher]:
    """The command in this process: its exit status, and what it printed and said to stderr."""
    try:
        code = main(["compare", *args])
    except SystemExit as exit_:  # argparse's usage errors
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, pytest.LineMatcher(out.splitlines()), pytest.LineMatcher(err.splitlines())


def test_the_slower_item_is_flagged_and_the_unchanged_one_is_not(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makepyfile(test_saved=SUITE)
    two, four = Server.llamacpp(slots=2), Server.llamacpp(slots=4)
    before = _saved(pytester, FakeBox({two: 100.0, four: 100.0}, seed=1), "before.json")
    after = _saved(pytester, FakeBox({two: 70.0, four: 100.0}, seed=2), "after.json")
    capsys.readouterr()
    code, out, _ = _compare(capsys, str(before), str(after))
    assert code == 1, out.str()
    out.fnmatch_lines(
        [
            f"A = {before}, B = {after}; ratio = B / A; *unpaired (the runs were not interleaved)",
            "test_saved.py::test_two_slots  <- worse in B",
            "  effective_tps * x0.7*  better x0.7* [[]*[]] FAIL",
            "  wall_s * x1.3*  better x0.7* [[]*[]] FAIL",
            "test_saved.py::test_four_slots",
            "  effective_tps * x*  better x*",
        ]
    )
    unchanged = out.str().split("test_saved.py::test_four_slots", 1)[1]
    assert "FAIL" not in unchanged and "worse in B" not in unchanged
    assert _compare(capsys, str(before), str(before))[0] == 0


def test_a_file_that_is_not_a_saved_run_exits_2_naming_it(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = pytester.path / "broken.json"
    broken.write_text("{not json")
    other = pytester.path / "other.json"
    other.write_text(json.dumps({"runs": []}))
    code, _, err = _compare(capsys, str(broken), str(other))
    assert code == 2
    err.fnmatch_lines([f"*compare: {broken}: not JSON (*"])
    code, _, err = _compare(capsys, str(other), str(other))
    assert code == 2
    err.fnmatch_lines([f"*compare: {other}: not a pytest-swarm JSON report*"])
    code, _, err = _compare(capsys, str(other), str(other), "--tolerance", "2")
    assert code == 2
    err.fnmatch_lines(["*--tolerance: expected a number between 0 and 1, got '2'*"])


def test_two_runs_of_the_history_are_compared_by_their_figures_saying_there_is_no_test(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """The history keeps one value a figure a run: the ratios, and no verdict claimed from them."""
    pytester.makepyfile(test_saved=SUITE)
    two, four = Server.llamacpp(slots=2), Server.llamacpp(slots=4)
    store = pytester.path / "history.sqlite"
    _saved(pytester, FakeBox({two: 100.0, four: 100.0}, seed=1), "before.json", f"--swarm-history={store}")
    _saved(pytester, FakeBox({two: 70.0, four: 100.0}, seed=2), "after.json", f"--swarm-history={store}")
    before, after = (run.run_id for run in HistoryStore(str(store)).runs())
    capsys.readouterr()
    code, out, _ = _compare(capsys, before[:8], after, "--store", str(store))
    assert code == 0, out.str()
    out.fnmatch_lines(
        [
            f"A = run {before[:12]}, B = run {after[:12]}; ratio = B / A; the history keeps a run's figures, not its "
            "rounds: ratios only, no test and no verdict",
            "test_saved.py::test_two_slots",
            "  effective_tps * x0.7*",
        ]
    )
    assert "FAIL" not in out.str() and "better" not in out.str()
    code, _, err = _compare(capsys, "not-an-id", after, "--store", str(store))
    assert code == 2
    err.fnmatch_lines(["*compare: history store *history.sqlite: no run with an id starting 'not-an-id'"])
    code, _, err = _compare(capsys, before, after, "--store", str(pytester.path / "none.sqlite"))
    assert code == 2
    err.fnmatch_lines(["*compare: no results store at *none.sqlite"])
