"""`python -m pytest_swarm history` (stores/history_command.py, __main__.py): what it prints, and its exit status when it cannot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_swarm.__main__ import main
from pytest_swarm.stores.history import HistoryStore
from tests.stores.history_data import run


@pytest.fixture
def store(tmp_path: Path) -> str:
    """Twelve runs of one test on testbox, a 10% drop from the seventh on, and one run on otherbox."""
    path = str(tmp_path / "h.sqlite")
    history = HistoryStore(path)
    history.check()
    for minute in range(12):
        history.append(run(minute, 100.0 * (1.0 if minute < 6 else 0.9) * (1.0 + 0.004 * (minute % 3))))
    history.append(run(20, 55.0, hardware="otherbox"))
    return path


def test_runs_lists_every_run_oldest_first(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "--store", store, "runs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["started", "(UTC)", "run", "hardware", "commit", "items", "complete", "host"]
    assert len(lines) == 14
    assert lines[1].startswith("2026-01-01T10:00:00") and "testbox" in lines[1] and "abc1234def" in lines[1]
    assert "otherbox" in lines[-1]
    assert main(["history", "--store", store, "runs", "--last", "2"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3


def test_series_prints_each_hardware_and_flags_the_step(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "--store", store, "series", "t.py::test_x", "effective_tps"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "t.py::test_x[c1] on otherbox: effective_tps, 1 runs, 0 change points"
    assert out[2] == "t.py::test_x[c1] on testbox: effective_tps, 12 runs, 1 change point"
    flagged = [line for line in out if "<- change" in line]
    assert len(flagged) == 1 and flagged[0].startswith("  2026-01-01T10:06:00") and "(worse)" in flagged[0]


def test_series_on_one_hardware(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["history", "--store", store, "series", "t.py::test_x[c1]", "effective_tps", "--hardware", "otherbox"])
        == 0
    )
    assert "testbox" not in capsys.readouterr().out


def test_nothing_matching_and_no_store_exit_1_saying_why(
    store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["history", "--store", store, "series", "t.py::nope", "effective_tps"]) == 1
    assert "no values of effective_tps for t.py::nope" in capsys.readouterr().err
    missing = tmp_path / "none.sqlite"
    assert main(["history", "--store", str(missing), "runs"]) == 1
    assert f"no results store at {missing}" in capsys.readouterr().err
    assert not missing.exists()  # looking never creates a store


def test_a_broken_store_and_an_unreachable_server_exit_1_with_the_password_hidden(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.sqlite"
    broken.write_bytes(b"not a database " * 100)
    assert main(["history", "--store", str(broken), "runs"]) == 1
    assert f"history store {broken}: cannot" in capsys.readouterr().err
    assert main(["history", "--store", "postgresql://me:hunter2@127.0.0.1:1/runs", "runs"]) == 1
    err = capsys.readouterr().err
    assert "postgresql://me:***@127.0.0.1:1/runs: cannot connect" in err and "hunter2" not in err


@pytest.mark.parametrize(
    "argv",
    [["history", "series", "only-a-test-id"], ["history", "runs", "--last", "0"], ["history", "runs", "--last", "-3"]],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2
    if "--last" in argv:
        assert "expected a positive number of runs" in capsys.readouterr().err


def test_it_runs_as_a_module(store: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest_swarm", "history", "--store", store, "runs"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "testbox" in done.stdout
