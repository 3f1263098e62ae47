"""The results store on a real PostgreSQL (Debian's package, started by tests/postgres.py): a fleet's one place.

The same schema and transactions as SQLite, checked against the server: concurrent
writers from threads lose nothing, the schema is created by whichever writer comes
first, and the URL's password is stored nowhere and shown nowhere.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from urllib.parse import quote

import psycopg
import pytest

from pytest_swarm.core.errors import HistoryError
from pytest_swarm.stores.history import TABLES, BisectStepRecord, HistoryStore, open_store
from tests import postgres
from tests.stores.history_data import run

WRITERS, RUNS_EACH, ITEMS_EACH = 6, 5, 3


def _count(url: str, table: str) -> int:
    with psycopg.connect(url) as db:
        row = db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
        assert row is not None
        return int(row[0])


def test_runs_and_series_round_trip(postgres_url: str) -> None:
    store = open_store(postgres_url)
    assert store is not None and store.postgres
    for minute, value in ((1, 98.0), (0, 100.0), (2, 90.0)):
        store.append(run(minute, value))
    assert [r.started_at[11:16] for r in store.runs()] == ["10:00", "10:01", "10:02"]
    points = store.series("t.py::test_x", "effective_tps", "testbox")[("t.py::test_x[c1]", "testbox")]
    assert [p.value for p in points] == [100.0, 98.0, 90.0]
    assert points[-1].verdict == "pass"


def test_concurrent_writers_lose_nothing_and_race_to_create_the_schema(postgres_url: str) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(WRITERS)

    def write(writer: int) -> None:
        try:
            store = HistoryStore(postgres_url)
            start.wait()
            for k in range(RUNS_EACH):
                store.append(run(writer * RUNS_EACH + k, items=ITEMS_EACH))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert _count(postgres_url, "swarm_runs") == WRITERS * RUNS_EACH
    assert _count(postgres_url, "swarm_items") == WRITERS * RUNS_EACH * ITEMS_EACH
    assert _count(postgres_url, "swarm_figures") == WRITERS * RUNS_EACH * ITEMS_EACH * 2


def test_the_password_is_stored_nowhere(postgres_url: str) -> None:
    store = open_store(postgres_url)
    assert store is not None
    stored = run(0)
    step = BisectStepRecord("#1 threads=1", "differs", "fail", 0.6, 0.55, 0.66, 8, 30.0)
    store.append(replace(stored, items=(replace(stored.items[0], bisect_steps=(step,)),)))
    assert store.bisect_steps(stored.run_id, stored.items[0].nodeid) == [step]
    assert postgres.PASSWORD not in store.name and quote(postgres.PASSWORD, safe="") not in store.name
    with psycopg.connect(postgres_url) as db:
        for table in TABLES:
            rows = db.execute(f"SELECT * FROM {table}").fetchall()
            assert rows
            assert postgres.PASSWORD not in repr(rows)


def test_a_wrong_password_is_named_without_the_password(postgres_server: postgres.Server, postgres_url: str) -> None:
    wrong = postgres_url.replace(quote(postgres.PASSWORD, safe=""), "Wr0ng-secret")
    with pytest.raises(HistoryError) as caught:
        open_store(wrong)
    message = str(caught.value)
    assert f"postgresql://swarm:***@127.0.0.1:{postgres_server.port}/" in message
    assert "cannot connect" in message and "Wr0ng-secret" not in message
