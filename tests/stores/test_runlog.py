"""What a finished run stores and the trends it reads back (runlog.py), on hand-built results: no engine needed.

The session calls this once at its end, after failures and interrupts too, so a
partial item must be stored (marked) yet kept out of the trends, every gated figure
must come back as a trend with this run last, and a store that fails must cost the
history only, said in words.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pytest_swarm.core.records import RequestRecord, RoundRecord
from pytest_swarm.figures.summary import summarize
from pytest_swarm.gate.verdict import evaluate
from pytest_swarm.marker.parse import parse_marker
from pytest_swarm.results.item import ItemResult
from pytest_swarm.settings import GateSettings
from pytest_swarm.stores.history import HistoryStore, open_store
from pytest_swarm.stores.runlog import finish, run_record, utc_now
from tests.factories import item_result

CONFIG = parse_marker((), {"concurrency": 2, "max_tokens": 5, "gate": ["effective_tps", "ttft.p95"]})


def _item(nodeid: str, speed: float, incomplete: bool = False) -> ItemResult:
    times = [0.1 + i / speed for i in range(5)]
    requests = [RequestRecord(agent=a, start=0.0, end=times[-1], token_times=times, output_tokens=5) for a in range(2)]
    result = summarize([RoundRecord(concurrency=2, wall_s=times[-1], requests=requests)], 5)
    item = item_result(
        nodeid,
        nodeid,
        CONFIG,
        result,
        evaluate(result, CONFIG.criteria, None, GateSettings()),
        info={"engine_version": "b4242"},
    )
    return replace(item, incomplete=incomplete)


def test_a_run_is_stored_with_figures_verdicts_and_origin(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "h.sqlite"))
    assert store is not None
    items = [_item("t.py::a", 50.0)]
    run = run_record(items, "testbox", {"git_commit": "abc123", "plugin_version": "0.1.0"}, utc_now(), complete=True)
    assert (
        run.items[0].verdict == "no baseline"
        and run.items[0].engine_version == "b4242"
        and run.items[0].server == CONFIG.server.label
    )
    assert run.items[0].figures["effective_tps"] > 0 and None not in run.items[0].figures.values()
    trends, problem = finish(store, run, items)
    assert problem is None
    assert [(t.nodeid, t.figure, len(t.points)) for t in trends] == [
        ("t.py::a", "effective_tps", 1),
        ("t.py::a", "ttft.p95", 1),
    ]
    assert trends[0].points[-1].run_id == run.run_id and trends[0].points[-1].git_commit == "abc123"
    assert store.runs()[0].git_commit == "abc123"


def test_a_partial_item_is_stored_but_left_out_of_its_trend(tmp_path: Path) -> None:
    store = HistoryStore(str(tmp_path / "h.sqlite"))
    store.check()
    for _k in range(3):
        finish(
            store,
            run_record([_item("t.py::a", 50.0)], "testbox", {}, utc_now(), complete=True),
            [_item("t.py::a", 50.0)],
        )
    partial = [_item("t.py::a", 5.0, incomplete=True)]
    trends, problem = finish(store, run_record(partial, "testbox", {}, utc_now(), complete=False), partial)
    assert problem is None
    assert [r.complete for r in store.runs()] == [True, True, True, False]
    assert [len(t.points) for t in trends] == [3, 3]


def test_a_store_that_fails_at_the_end_costs_the_trends_and_says_why(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    store = open_store(str(path))
    assert store is not None
    path.unlink()
    path.mkdir()
    items = [_item("t.py::a", 50.0)]
    trends, problem = finish(store, run_record(items, "testbox", {}, utc_now(), complete=True), items)
    assert trends == []
    assert problem is not None and problem.startswith(f"history store {path}: cannot connect")


def test_a_test_measured_twice_in_a_run_keeps_its_last_measurement_and_the_run_is_stored(tmp_path: Path) -> None:
    """A rerun plugin or `--count` measures one node id twice: the run must still be stored, with the later figures."""
    store = open_store(str(tmp_path / "h.sqlite"))
    assert store is not None
    first, later = _item("t.py::a", 50.0), _item("t.py::a", 25.0)
    run = run_record([first, _item("t.py::b", 40.0), later], "testbox", {}, utc_now(), complete=True)
    assert [i.nodeid for i in run.items] == ["t.py::a", "t.py::b"]
    _trends, problem = finish(store, run, [])
    assert problem is None
    [point] = store.series("t.py::a", "effective_tps")[("t.py::a", "testbox")]
    assert point.value == later.result.effective_tps < first.result.effective_tps, "the later, slower measurement"


def test_a_series_for_a_test_function_takes_its_parametrized_items_only_and_is_case_exact(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "h.sqlite"))
    assert store is not None
    items = [
        _item("t.py::test_x[c1]", 50.0),
        _item("t.py::test_X[c1]", 40.0),
        _item("t.py::test_x_y[c1]", 30.0),
        _item("t.py::test_x", 20.0),
    ]
    store.append(run_record(items, "testbox", {}, utc_now(), complete=True))
    assert sorted(node for node, _ in store.series("t.py::test_x", "effective_tps")) == [
        "t.py::test_x",
        "t.py::test_x[c1]",
    ]
