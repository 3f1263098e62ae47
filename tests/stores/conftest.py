"""A real PostgreSQL for the history store's tests: one server per session, a fresh database per test."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from pytest_postgresql.janitor import DatabaseJanitor

from tests import postgres

_names = itertools.count()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[postgres.Server]:
    with postgres.running() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: postgres.Server) -> Iterator[str]:
    """`postgresql://swarm:<password, percent-encoded>@127.0.0.1:<port>/<a database of this test's own>`."""
    s = postgres_server
    dbname = f"history_{next(_names)}"
    with DatabaseJanitor(user=s.user, host=s.host, port=s.port, dbname=dbname, password=s.password):
        yield f"postgresql://{s.user}:{quote(s.password, safe='')}@{s.host}:{s.port}/{dbname}"
