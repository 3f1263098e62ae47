"""The results store on SQLite (history.py): what goes in comes out, concurrent writers lose nothing, bad stores say where.

The store is written by every run of every pytest process on a machine, so: runs
appended by processes at once must all be there, a run is stored whole or not at
all, and a store that cannot be opened or written is named (redacted) at the start.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_swarm.core.errors import HistoryError
from pytest_swarm.stores.history import (
    SCHEMA_VERSION,
    BisectStepRecord,
    HistoryStore,
    ItemRecord,
    RunRecord,
    open_store,
)
from tests.stores.history_data import run

WRITERS, RUNS_EACH, ITEMS_EACH = 4, 6, 3


def _count(path: Path, table: str) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


def test_runs_and_series_come_back_in_order_with_their_fields(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "h.sqlite"))
    assert store is not None
    for minute, value in ((2, 90.0), (0, 100.0), (1, 98.0)):
        store.append(run(minute, value))
    store.append(run(3, 50.0, hardware="otherbox"))
    store.append(run(4, 10.0, incomplete=True))
    runs = store.runs()
    assert [r.started_at[11:16] for r in runs] == ["10:00", "10:01", "10:02", "10:03", "10:04"]
    assert [r.complete for r in runs] == [True, True, True, True, False]
    assert (
        runs[0].hardware == "testbox"
        and runs[0].git_commit == "abc1234def"
        and runs[0].items == 1
        and runs[0].host == "host-a"
    )
    assert [r.started_at[11:16] for r in store.runs(last=2)] == ["10:03", "10:04"]

    series = store.series("t.py::test_x[c1]", "effective_tps")
    assert sorted(series) == [("t.py::test_x[c1]", "otherbox"), ("t.py::test_x[c1]", "testbox")]
    points = series[("t.py::test_x[c1]", "testbox")]
    assert [p.value for p in points] == [100.0, 98.0, 90.0]  # the partial run's 10.0 is left out
    assert (
        points[0].engine_version == "xllamacpp 0.2"
        and points[0].verdict == "pass"
        and points[0].git_commit == "abc1234def"
    )
    assert list(store.series("t.py::test_x", "effective_tps", hardware="testbox")) == [("t.py::test_x[c1]", "testbox")]
    assert [
        p.value
        for p in store.series("t.py::test_x", "effective_tps", "testbox", last=1)[("t.py::test_x[c1]", "testbox")]
    ] == [90.0]
    assert store.series("t.py::test", "effective_tps") == {}  # a prefix that is not a test's own id matches nothing
    assert store.series("t.py::test_x", "no_such_figure") == {}


def test_a_run_is_stored_whole_or_not_at_all(tmp_path: Path) -> None:
    store = HistoryStore(str(tmp_path / "h.sqlite"))
    store.append(run(0))
    item = run(1).items[0]
    broken = RunRecord(
        "r-broken", "2026-01-01T11:00:00Z", "x", "testbox", None, "0.1.0", None, True, (item, item)
    )  # the same node twice
    with pytest.raises(HistoryError, match="cannot append the run"):
        store.append(broken)
    assert _count(tmp_path / "h.sqlite", "swarm_runs") == 1
    assert _count(tmp_path / "h.sqlite", "swarm_items") == 1


def test_a_value_that_is_not_finite_is_not_stored(tmp_path: Path) -> None:
    store = HistoryStore(str(tmp_path / "h.sqlite"))
    item = ItemRecord(
        "t.py::a", "t.py::a", "llama.cpp", None, None, False, {"effective_tps": float("nan"), "wall_s": 2.0}, {}
    )
    store.append(RunRecord("r1", "2026-01-01T10:00:00Z", "x", "testbox", None, "0.1.0", None, True, (item,)))
    assert store.series("t.py::a", "effective_tps") == {}
    assert [p.value for p in store.series("t.py::a", "wall_s")[("t.py::a", "testbox")]] == [2.0]


def _writer(path: str, writer: int) -> None:
    store = HistoryStore(path)
    for k in range(RUNS_EACH):
        store.append(run(writer * RUNS_EACH + k, items=ITEMS_EACH))


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=_writer, args=(str(path), w)) for w in range(WRITERS)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(60)
    assert [p.exitcode for p in processes] == [0] * WRITERS
    assert _count(path, "swarm_runs") == WRITERS * RUNS_EACH
    assert _count(path, "swarm_items") == WRITERS * RUNS_EACH * ITEMS_EACH
    assert _count(path, "swarm_figures") == WRITERS * RUNS_EACH * ITEMS_EACH * 2


def _opener(path: str, start: Any) -> None:
    start.wait()
    open_store(path)


def test_two_runs_that_open_a_new_store_at_the_same_instant_both_get_it(tmp_path: Path) -> None:
    """Two pytest runs started together on one project: SQLite answers the second's switch to WAL "database is
    locked" at once, past its busy timeout, in about 1 try of 20 (8 of 150 here before the retry); 60 tries, each two
    processes released by one barrier onto a store that does not exist yet."""
    context = multiprocessing.get_context("fork")
    for attempt in range(60):
        path, start = str(tmp_path / str(attempt) / "h.sqlite"), context.Barrier(2)
        processes = [context.Process(target=_opener, args=(path, start)) for _ in range(2)]
        for p in processes:
            p.start()
        for p in processes:
            p.join(60)
        assert [p.exitcode for p in processes] == [0, 0], f"attempt {attempt}"


def test_the_start_check_writes_nothing_and_makes_the_directory(tmp_path: Path) -> None:
    path = tmp_path / "new" / "dir" / "h.sqlite"
    assert open_store(str(path)) is not None
    assert _count(path, "swarm_runs") == 0
    assert open_store(None) is None


def test_a_broken_database_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    path.write_bytes(b"this is not a database, it is a text file that happens to be long enough to have a header" * 20)
    with pytest.raises(HistoryError, match=rf"history store {path}: .*not a database"):
        open_store(str(path))


@pytest.mark.parametrize("where", ["parent is a file", "a directory"])
def test_a_store_that_cannot_be_created_is_named(tmp_path: Path, where: str) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    path = tmp_path / "file" / "h.sqlite" if where == "parent is a file" else tmp_path / "dir"
    with pytest.raises(HistoryError, match=rf"history store {path}: cannot connect"):
        open_store(str(path))


def test_a_store_of_another_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    open_store(str(path))
    with sqlite3.connect(path) as db:
        db.execute("UPDATE swarm_schema SET version = ?", (SCHEMA_VERSION + 1,))
    with pytest.raises(
        HistoryError, match=f"schema version {SCHEMA_VERSION + 1}, this pytest-swarm reads {SCHEMA_VERSION}"
    ):
        open_store(str(path))


def test_an_unknown_url_scheme_is_refused_with_the_password_hidden() -> None:
    with pytest.raises(HistoryError) as caught:
        HistoryStore("mysql://me:hunter2@db/x")
    assert "mysql://me:***@db/x" in str(caught.value) and "hunter2" not in str(caught.value)


def test_a_bisects_steps_are_stored_with_its_item_and_read_back_in_order(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "h.sqlite"))
    assert store is not None
    steps = (
        BisectStepRecord("#7 version=2026.10.11549", "differs", "fail", 0.52, 0.48, 0.57, 10, 41.5),
        BisectStepRecord("#3 version=2026.7.10068", "same", "pass", 1.01, 0.97, 1.05, 12, 88.0),
        BisectStepRecord("#5 version=2026.8.10566", "undecided", "inconclusive", None, None, None, 0, 3.0),
    )
    stored = run(0, 100.0)
    item = replace(stored.items[0], bisect_steps=steps)
    store.append(replace(stored, items=(item,)))
    assert store.bisect_steps(stored.run_id, item.nodeid) == list(steps)
    assert store.bisect_steps(stored.run_id, "t.py::other") == []


def test_a_store_of_the_first_schema_gets_the_bisect_table_and_keeps_its_runs(tmp_path: Path) -> None:
    """A store written before bisects were stored (schema 1) is brought up to this schema in place, its runs kept."""
    path = tmp_path / "h.sqlite"
    store = open_store(str(path))
    assert store is not None
    store.append(run(0, 100.0))
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE swarm_bisect_steps")
        db.execute("UPDATE swarm_schema SET version = 1")
    again = open_store(str(path))
    assert again is not None and len(again.runs()) == 1
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT version FROM swarm_schema").fetchone()[0] == SCHEMA_VERSION == 2
    assert _count(path, "swarm_bisect_steps") == 0
