"""A real PostgreSQL (Debian's `postgresql` package) for the history store's tests, one server per session.

pytest-postgresql's `postgresql_proc` runs initdb and pg_ctl as the current user, and
initdb refuses root, which CI runs as; so the server is started here, as the `postgres`
user when we are root, in a directory it owns, with password authentication (the
tests need a password in the URL); pytest-postgresql's DatabaseJanitor then gives each
test a database of its own. pg_ctl is found under /usr/lib/postgresql/<newest>/bin or
on the PATH; a missing one fails the test loudly (scripts/install-test-deps installs it).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

USER = "swarm"
PASSWORD = "s3cret-Pw:with@odd/chars"
"""Characters a URL must escape: the redaction must find the password however the URL spells it."""


def bin_dir() -> Path:
    """The directory of pg_ctl and initdb: Debian's newest version, else the PATH's."""
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0
    )
    if versions:
        return versions[-1].parent
    found = shutil.which("pg_ctl")
    if found is None:
        pytest.fail(
            "PostgreSQL is not installed: apt-get install -y postgresql (scripts/install-test-deps installs it)",
            pytrace=False,
        )
    return Path(found).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Server:
    host: str
    port: int
    user: str = USER
    password: str = PASSWORD


def _step(argv: list[str], log: Path | None = None) -> None:
    """One step of starting the server; its failure says which, with what it and the server's log printed."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        logged = log.read_text(errors="replace")[-2000:] if log is not None and log.exists() else ""
        raise RuntimeError(
            f"{Path(argv[argv.index('--') + 1] if '--' in argv else argv[0]).name} failed ({done.returncode}): "
            f"{done.stderr.strip() or done.stdout.strip()}\n{logged}"
        )


@contextmanager
def running() -> Iterator[Server]:
    """initdb, start, yield, stop (immediate) and remove: nothing outlives the session."""
    bindir = bin_dir()
    base = Path(tempfile.mkdtemp(prefix="swarm-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(base, owner.pw_uid, owner.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    (base / "pw").write_text(PASSWORD)
    if as_user:
        os.chown(base / "pw", owner.pw_uid, owner.pw_gid)
    data, port = base / "data", _free_port()
    try:
        _step(
            [
                *as_user,
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                USER,
                "--auth=scram-sha-256",
                f"--pwfile={base / 'pw'}",
                "-E",
                "UTF8",
            ]
        )
        options = f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off"
        _step(
            [*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(base / "log"), "-w", "start"],
            base / "log",
        )
        yield Server("127.0.0.1", port)
    finally:
        if data.exists():
            subprocess.run(
                [*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                capture_output=True,
                timeout=60,
            )
        shutil.rmtree(base, ignore_errors=True)
