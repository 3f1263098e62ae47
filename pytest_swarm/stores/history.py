"""The results store (SQLite, or PostgreSQL by URL): every run's figures and verdicts, appended one transaction each."""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .._util.credentials import redact, scrub
from ..core.errors import HistoryError
from ..gate.trends import TrendPoint

SCHEMA_VERSION = 2
POSTGRES_SCHEMES = ("postgresql", "postgres")
BUSY_TIMEOUT_S = 60.0
CONNECT_TIMEOUT_S = 10
_SCHEMA_LOCK = 7_240_151
"""Postgres advisory lock held while the schema is created: CREATE TABLE IF NOT EXISTS races itself there."""

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS swarm_schema (version INTEGER NOT NULL)",
    """CREATE TABLE IF NOT EXISTS swarm_runs (
        run_id TEXT PRIMARY KEY, started_at TEXT NOT NULL, finished_at TEXT NOT NULL, hardware TEXT NOT NULL,
        git_commit TEXT, plugin_version TEXT NOT NULL, host TEXT, complete INTEGER NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS swarm_items (
        run_id TEXT NOT NULL REFERENCES swarm_runs (run_id), nodeid TEXT NOT NULL, test_key TEXT NOT NULL,
        server TEXT NOT NULL, engine_version TEXT, verdict TEXT, incomplete INTEGER NOT NULL,"""
    " PRIMARY KEY (run_id, nodeid))",
    """CREATE TABLE IF NOT EXISTS swarm_figures (
        run_id TEXT NOT NULL, nodeid TEXT NOT NULL, figure TEXT NOT NULL, value DOUBLE PRECISION NOT NULL, verdict TEXT,
        PRIMARY KEY (run_id, nodeid, figure), FOREIGN KEY (run_id, nodeid) REFERENCES swarm_items (run_id, nodeid))""",
    "CREATE INDEX IF NOT EXISTS swarm_figures_by_test ON swarm_figures (nodeid, figure)",
    _BISECT_STEPS := """CREATE TABLE IF NOT EXISTS swarm_bisect_steps (
        run_id TEXT NOT NULL, nodeid TEXT NOT NULL, step INTEGER NOT NULL, probed TEXT NOT NULL, finding TEXT NOT NULL,
        verdict TEXT NOT NULL, ratio DOUBLE PRECISION, lower_bound DOUBLE PRECISION, upper_bound DOUBLE PRECISION,
        pairs INTEGER NOT NULL, seconds DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (run_id, nodeid, step), FOREIGN KEY (run_id, nodeid) REFERENCES swarm_items (run_id, nodeid))""",
)
MIGRATIONS = {1: (_BISECT_STEPS,)}
"""What brings a store of each older schema version to the next: version 2 added a bisect's steps."""
TABLES = ("swarm_schema", "swarm_runs", "swarm_items", "swarm_figures", "swarm_bisect_steps")


def is_postgres(location: str) -> bool:
    return urlsplit(location).scheme in POSTGRES_SCHEMES


@dataclass(frozen=True)
class BisectStepRecord:
    """One step of a bisect item as stored: what it measured against the first server, and what it found."""

    probed: str
    finding: str
    verdict: str
    ratio: float | None
    lower: float | None
    upper: float | None
    pairs: int
    seconds: float


@dataclass(frozen=True)
class ItemRecord:
    """One item of a stored run: what was measured, its verdict, its scalar figures, and a bisect's steps."""

    nodeid: str
    test_key: str
    server: str
    engine_version: str | None
    verdict: str | None
    incomplete: bool
    figures: dict[str, float]
    figure_verdicts: dict[str, str]
    bisect_steps: tuple[BisectStepRecord, ...] = ()


@dataclass(frozen=True)
class RunRecord:
    """One run as the results store keeps it: when, where, on which commit, and its items."""

    run_id: str
    started_at: str
    """ISO 8601 UTC with microseconds: sorts as text on both backends."""
    finished_at: str
    hardware: str
    git_commit: str | None
    plugin_version: str
    host: str | None
    complete: bool
    items: tuple[ItemRecord, ...]


@dataclass(frozen=True)
class RunInfo:
    """A stored run as `history runs` lists it, without its items."""

    run_id: str
    started_at: str
    hardware: str
    git_commit: str | None
    plugin_version: str
    host: str | None
    complete: bool
    items: int


class HistoryStore:
    """One store by its location: a SQLite path or a PostgreSQL URL. Connects per operation: a run may measure for
    hours."""

    def __init__(self, location: str) -> None:
        self._location = location
        self.name = redact(location)
        self.postgres = is_postgres(location)
        if not self.postgres and "://" in location:
            raise HistoryError(
                f"history store {self.name}: unsupported URL scheme (a path for SQLite, or postgresql://user:pass@host/db)"
            )

    def _errors(self) -> tuple[type[BaseException], ...]:
        if not self.postgres:
            return (sqlite3.Error, OSError)
        import psycopg  # here: only a postgresql:// store needs the driver (the `postgres` extra)

        return (psycopg.Error, OSError)

    @contextmanager
    def _connect(self, doing: str) -> Iterator[Any]:
        """A connection in autocommit mode (transactions are explicit); every driver error becomes a HistoryError saying
        what failed."""
        try:
            connection = self._open()
        except HistoryError:
            raise
        except self._errors() as exc:
            raise HistoryError(
                f"history store {self.name}: cannot connect ({doing}): {scrub(str(exc).strip(), self._location)}"
            ) from None
        try:
            yield connection
        except self._errors() as exc:
            raise HistoryError(
                f"history store {self.name}: cannot {doing}: {scrub(str(exc).strip(), self._location)}"
            ) from None
        finally:
            connection.close()

    def _open(self) -> Any:
        if self.postgres:
            try:
                import psycopg  # here: only a postgresql:// store needs the driver (the `postgres` extra)
            except ImportError:
                raise HistoryError(
                    f"history store {self.name}: needs psycopg: pip install 'pytest-llm-swarm[postgres]'"
                ) from None
            return psycopg.connect(self._location, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True)
        path = Path(self._location)
        path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            _write_ahead(connection)
            connection.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            connection.close()  # a file that is not a database: the caller gets the error, not an open handle
            raise
        return connection

    def _sql(self, statement: str) -> str:
        return statement.replace("?", "%s") if self.postgres else statement

    @contextmanager
    def _transaction(self, connection: Any) -> Iterator[None]:
        """All or nothing; SQLite takes its write lock at BEGIN, so two writers queue rather than deadlock."""
        connection.execute("BEGIN" if self.postgres else "BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")

    def _has_schema(self, connection: Any) -> bool:
        """Whether the tables are there: asked first, because PostgreSQL checks CREATE rights even for IF NOT EXISTS,
        and a fleet's writer role may hold only SELECT and INSERT."""
        if self.postgres:
            return connection.execute("SELECT to_regclass('swarm_schema') IS NOT NULL").fetchone()[0] is True
        found = connection.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'swarm_schema'"
        ).fetchone()
        return found is not None

    def _ensure_schema(self, connection: Any) -> None:
        if self._has_schema(connection):
            rows = connection.execute("SELECT version FROM swarm_schema").fetchall()
            if rows and rows[0][0] == SCHEMA_VERSION:
                return
        with self._transaction(connection):
            if self.postgres:
                connection.execute(self._sql("SELECT pg_advisory_xact_lock(?)"), (_SCHEMA_LOCK,))
            for statement in _SCHEMA:
                connection.execute(statement)
            rows = connection.execute("SELECT version FROM swarm_schema").fetchall()
            if not rows:
                connection.execute(self._sql("INSERT INTO swarm_schema (version) VALUES (?)"), (SCHEMA_VERSION,))
                return
            version = rows[0][0]
            while version in MIGRATIONS:  # an older store: brought up to this one's schema, in the same transaction
                for statement in MIGRATIONS[version]:
                    connection.execute(statement)
                version += 1
            if version != SCHEMA_VERSION:
                raise HistoryError(
                    f"history store {self.name}: schema version {rows[0][0]}, this pytest-swarm reads {SCHEMA_VERSION}"
                )
            connection.execute(self._sql("UPDATE swarm_schema SET version = ?"), (SCHEMA_VERSION,))

    def check(self) -> None:
        """At the start of a run: reachable, schema in place, writable (a probe row written and rolled back)."""
        with self._connect("open the store") as connection:
            self._ensure_schema(connection)
            connection.execute("BEGIN" if self.postgres else "BEGIN IMMEDIATE")
            try:
                connection.execute(
                    self._sql(
                        "INSERT INTO swarm_runs (run_id, started_at, finished_at, hardware, plugin_version, complete)"
                        " VALUES (?, ?, ?, ?, ?, ?)"
                    ),
                    ("write-probe", "", "", "", "", 0),
                )
            finally:
                connection.execute("ROLLBACK")

    def append(self, run: RunRecord) -> None:
        """The run, its items and their figures, in one transaction."""
        with self._connect("append the run") as connection:
            self._ensure_schema(connection)
            with self._transaction(connection):
                connection.execute(
                    self._sql(
                        "INSERT INTO swarm_runs (run_id, started_at, finished_at, hardware, git_commit, plugin_version,"
                        " host, complete) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                    ),
                    (
                        run.run_id,
                        run.started_at,
                        run.finished_at,
                        run.hardware,
                        run.git_commit,
                        run.plugin_version,
                        run.host,
                        int(run.complete),
                    ),
                )
                for item in run.items:
                    connection.execute(
                        self._sql(
                            "INSERT INTO swarm_items (run_id, nodeid, test_key, server, engine_version, verdict,"
                            " incomplete) VALUES (?, ?, ?, ?, ?, ?, ?)"
                        ),
                        (
                            run.run_id,
                            item.nodeid,
                            item.test_key,
                            item.server,
                            item.engine_version,
                            item.verdict,
                            int(item.incomplete),
                        ),
                    )
                    for figure, value in item.figures.items():
                        if math.isfinite(value):
                            connection.execute(
                                self._sql(
                                    "INSERT INTO swarm_figures (run_id, nodeid, figure, value, verdict)"
                                    " VALUES (?, ?, ?, ?, ?)"
                                ),
                                (run.run_id, item.nodeid, figure, value, item.figure_verdicts.get(figure)),
                            )
                    for number, step in enumerate(item.bisect_steps, 1):
                        connection.execute(
                            self._sql(
                                "INSERT INTO swarm_bisect_steps (run_id, nodeid, step, probed, finding, verdict, ratio,"
                                " lower_bound, upper_bound, pairs, seconds) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                            ),
                            (run.run_id, item.nodeid, number, *astuple(step)),
                        )

    def bisect_steps(self, run_id: str, nodeid: str) -> list[BisectStepRecord]:
        """A bisect item's steps in one stored run, in the order taken."""
        with self._connect("read a bisect's steps") as connection:
            rows = connection.execute(
                self._sql(
                    "SELECT probed, finding, verdict, ratio, lower_bound, upper_bound, pairs, seconds"
                    " FROM swarm_bisect_steps WHERE run_id = ? AND nodeid = ? ORDER BY step"
                ),
                (run_id, nodeid),
            ).fetchall()
        return [BisectStepRecord(*row) for row in rows]

    def runs(self, last: int | None = None) -> list[RunInfo]:
        """Stored runs, oldest first (the `last` ones when given), each with its count of items."""
        with self._connect("read the runs") as connection:
            rows = connection.execute(
                "SELECT r.run_id, r.started_at, r.hardware, r.git_commit, r.plugin_version, r.host, r.complete,"
                " COUNT(i.nodeid) FROM swarm_runs r LEFT JOIN swarm_items i ON i.run_id = r.run_id"
                " GROUP BY r.run_id, r.started_at, r.hardware, r.git_commit, r.plugin_version, r.host, r.complete"
                " ORDER BY r.started_at DESC, r.run_id DESC" + (f" LIMIT {int(last)}" if last is not None else "")
            ).fetchall()
        return [RunInfo(r[0], r[1], r[2], r[3], r[4], r[5], bool(r[6]), int(r[7])) for r in reversed(rows)]

    def run_figures(self, run: str) -> tuple[str, dict[str, dict[str, float]]]:
        """One stored run's figures by node id, the run named by its id or a prefix of it as `history runs` shows
        it; HistoryError where none or several match."""
        with self._connect("read a run's figures") as connection:
            ids = [
                row[0]
                for row in connection.execute(
                    self._sql("SELECT run_id FROM swarm_runs WHERE substr(run_id, 1, ?) = ?"), (len(run), run)
                ).fetchall()
            ]
            if len(ids) != 1:
                found = "no run" if not ids else f"{len(ids)} runs ({', '.join(sorted(i[:12] for i in ids))})"
                raise HistoryError(f"history store {self.name}: {found} with an id starting {run!r}")
            rows = connection.execute(
                self._sql("SELECT nodeid, figure, value FROM swarm_figures WHERE run_id = ? ORDER BY nodeid, figure"),
                (ids[0],),
            ).fetchall()
        figures: dict[str, dict[str, float]] = {}
        for nodeid, figure, value in rows:
            figures.setdefault(nodeid, {})[figure] = float(value)
        return ids[0], figures

    def series(
        self, test: str, figure: str, hardware: str | None = None, last: int | None = None
    ) -> dict[tuple[str, str], list[TrendPoint]]:
        """One figure's values per (node id, hardware), oldest first, complete items only. A test function's id
        stands for all its parametrized items."""
        # A prefix compared as a substring, not LIKE: LIKE ignores case on SQLite and not on PostgreSQL.
        params: list[Any] = [figure, test, len(test) + 1, test + "["]
        where = "f.figure = ? AND (f.nodeid = ? OR substr(f.nodeid, 1, ?) = ?) AND i.incomplete = 0"
        if hardware is not None:
            where += " AND r.hardware = ?"
            params.append(hardware)
        with self._connect("read a series") as connection:
            rows = connection.execute(
                self._sql(
                    "SELECT f.nodeid, r.hardware, r.run_id, r.started_at, r.git_commit, i.engine_version, f.value,"
                    " f.verdict FROM swarm_figures f JOIN swarm_items i ON i.run_id = f.run_id AND i.nodeid = f.nodeid"
                    f" JOIN swarm_runs r ON r.run_id = f.run_id WHERE {where} ORDER BY r.started_at, r.run_id"
                ),
                params,
            ).fetchall()
        found: dict[tuple[str, str], list[TrendPoint]] = {}
        for nodeid, hw, run_id, started_at, commit, engine, value, verdict in rows:
            found.setdefault((nodeid, hw), []).append(
                TrendPoint(run_id, started_at, commit, engine, float(value), verdict)
            )
        return {key: points[-last:] if last else points for key, points in found.items()}


def _write_ahead(connection: sqlite3.Connection) -> None:
    """The store in WAL mode, retried while another process holds the lock: SQLite answers the switch "database is
    locked" at once, without its busy handler, while a second process opens a new store (two pytest runs started
    together)."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def open_store(location: str | None) -> HistoryStore | None:
    """The run's store, checked now (reachable, writable) so a bad one stops the run before anything is measured; None
    when off."""
    if location is None:
        return None
    store = HistoryStore(location)
    store.check()
    return store
