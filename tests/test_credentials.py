"""The one place credentials are hidden (_util/credentials.py): every way a URL can carry a secret, and a driver's words about it."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from pytest_swarm._util.credentials import redact, scrub

SECRET = "p@ss:w/rd%"


@pytest.mark.parametrize(
    ("location", "shown"),
    [
        (f"postgresql://me:{quote(SECRET, safe='')}@db.example:5432/runs", "postgresql://me:***@db.example:5432/runs"),
        ("postgresql://me@db/runs", "postgresql://me@db/runs"),
        ("postgresql://db/runs?password=hunter2&sslmode=require", "postgresql://db/runs?password=***&sslmode=require"),
        ("postgres://:hunter2@db/runs", "postgres://:***@db/runs"),
        ("/var/lib/swarm/history.sqlite", "/var/lib/swarm/history.sqlite"),
        ("baselines/history.sqlite", "baselines/history.sqlite"),
    ],
)
def test_redact_hides_passwords_and_keeps_the_rest(location: str, shown: str) -> None:
    assert redact(location) == shown


def test_scrub_cuts_the_secret_from_a_message_in_any_spelling() -> None:
    url = f"postgresql://me:{quote(SECRET, safe='')}@db/runs"
    message = f"connection to {url} failed; password {SECRET!r} (encoded {quote(SECRET, safe='')}) rejected"
    cleaned = scrub(message, url)
    assert SECRET not in cleaned and quote(SECRET, safe="") not in cleaned
    assert "postgresql://me:***@db/runs" in cleaned


def test_scrub_leaves_text_alone_when_there_is_no_secret() -> None:
    assert scrub("unable to open database file", "/tmp/h.sqlite") == "unable to open database file"
