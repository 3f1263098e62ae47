"""Sleeping servers: which specs can sleep and how they boot for it, and PausedProcess on real process trees.

The engines' own sleepers run against their stand-ins in test_vllm.py and test_ollama.py. Here a
`python -c` server that starts a worker stands for any engine: both write a heartbeat, so a
stopped tree is seen to do nothing and a continued one to run again, and its SIGTERM handler
writes down that it was asked to end, so a stop that had to SIGKILL a tree it could not reach
shows. Under a keeper the server hears SIGTERM twice (the group's and the keeper's, moments
apart): its handler ignores the second, as real servers do, or the nested `worker.wait()` would
wait on the lock the first one holds, for ever (a CI run saw it as a keeper killed by SIGKILL).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from pytest_swarm import Server, SleepError, SpecError
from pytest_swarm.engines.process import ServerProcess
from pytest_swarm.engines.registry import sleep_mode_for
from pytest_swarm.engines.sleep import PausedProcess
from pytest_swarm.engines.vllm import server_argv

WORKER = """
import pathlib, signal, sys, time
beat = pathlib.Path(sys.argv[1])
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
n = 0
while True:
    n += 1
    beat.write_text(str(n))
    time.sleep(0.02)
"""

SERVER = f"""
import pathlib, signal, subprocess, sys, time
here = pathlib.Path(sys.argv[1])
worker = subprocess.Popen([sys.executable, "-c", {WORKER!r}, str(here / "worker.beat")])

def ended(*_):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM (the group's and the keeper's) must not re-enter
    (here / "sigterm").write_text("asked to end")
    worker.terminate()
    worker.wait()
    sys.exit(0)

signal.signal(signal.SIGTERM, ended)
(here / "worker.pid").write_text(str(worker.pid))  # the tests stop it once this is there: the handler is in place
n = 0
while True:
    n += 1
    (here / "server.beat").write_text(str(n))
    time.sleep(0.02)
"""


def _wait_for(path: Path, timeout_s: float = 20.0) -> str:
    deadline = time.monotonic() + timeout_s
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"{path.name} never written"
        time.sleep(0.02)
    return path.read_text()


def _beats(here: Path) -> tuple[str, str]:
    return (here / "server.beat").read_text(), (here / "worker.beat").read_text()


def _statuses(*pids: int) -> list[str]:
    return [psutil.Process(pid).status() for pid in pids]


def _gone(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """The server and its worker, running: (the server's Popen, the worker's pid)."""
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(tmp_path)], start_new_session=True)
    worker = int(_wait_for(tmp_path / "worker.pid"))
    _wait_for(tmp_path / "worker.beat")
    yield server, worker
    for pid in (worker, server.pid):
        if not _gone(pid):
            psutil.Process(pid).kill()
    server.wait(timeout=10)


def test_a_paused_tree_stops_every_process_and_a_woken_one_runs_again(
    tmp_path: Path, tree: tuple[subprocess.Popen[bytes], int]
) -> None:
    server, worker = tree
    paused = PausedProcess(server.pid, label="stand-in x1")
    paused.sleep()
    assert _statuses(server.pid, worker) == [psutil.STATUS_STOPPED, psutil.STATUS_STOPPED]
    asleep = _beats(tmp_path)
    time.sleep(0.3)
    assert _beats(tmp_path) == asleep, "a stopped process writes nothing"
    paused.wake()
    assert psutil.STATUS_STOPPED not in _statuses(server.pid, worker)
    deadline = time.monotonic() + 10
    while _beats(tmp_path)[0] == asleep[0] or _beats(tmp_path)[1] == asleep[1]:
        assert time.monotonic() < deadline, "both run again"
        time.sleep(0.02)


def test_a_server_stopped_while_paused_hears_its_sigterm_and_leaves_nothing(tmp_path: Path) -> None:
    """Without SIGCONT the SIGTERM would stay pending for the whole grace, then SIGKILL: no "sigterm" file."""
    process = ServerProcess([sys.executable, "-c", SERVER, str(tmp_path)], tmp_path / "server.log")
    worker = int(_wait_for(tmp_path / "worker.pid"))
    PausedProcess(process.pid).sleep()
    assert _statuses(process.pid, worker) == [psutil.STATUS_STOPPED, psutil.STATUS_STOPPED]
    process.stop(grace_s=60)
    assert (tmp_path / "sigterm").read_text() == "asked to end"
    assert process.poll() == 0, "it ended on its own SIGTERM handler, not on SIGKILL"
    assert _gone(worker)


def test_under_its_keeper_the_engine_sleeps_the_keeper_stays_awake_and_stop_ends_it_all(tmp_path: Path) -> None:
    """The keeper must stay able to act on its parent-death signal while the server sleeps."""
    process = ServerProcess([sys.executable, "-c", SERVER, str(tmp_path)], tmp_path / "server.log", keeper_grace_s=60)
    worker = int(_wait_for(tmp_path / "worker.pid"))
    (engine,) = psutil.Process(process.pid).children()
    PausedProcess(process.pid).sleep()
    assert _statuses(engine.pid, worker) == [psutil.STATUS_STOPPED, psutil.STATUS_STOPPED]
    assert _statuses(process.pid) != [psutil.STATUS_STOPPED]
    process.stop(grace_s=60)
    assert (tmp_path / "sigterm").read_text() == "asked to end"
    assert process.poll() == 0
    assert _gone(engine.pid)
    assert _gone(worker)


def test_a_server_that_is_gone_cannot_sleep_and_the_error_names_it() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with pytest.raises(SleepError, match=rf"vllm:m x1: cannot stop its processes: NoSuchProcess.*{gone.pid}"):
        PausedProcess(gone.pid, label="vllm:m x1").sleep()


def test_a_vllm_spec_booted_to_sleep_has_the_flag_and_keeps_its_label() -> None:
    plain = Server.vllm("org/m", max_num_seqs=4)
    mode = sleep_mode_for(plain)
    assert mode is not None
    asleep = mode.enable(plain)
    assert asleep == Server.vllm("org/m", max_num_seqs=4, sleep_mode=True)
    assert asleep.label == plain.label, "the same server measures the same: one baseline"
    assert "--enable-sleep-mode" in server_argv(asleep, 8000)
    assert "--enable-sleep-mode" not in server_argv(plain, 8000)


def test_vllm_sleeps_on_cuda_only_and_in_dev_mode_only() -> None:
    assert sleep_mode_for(Server.vllm("org/m", device="cpu")) is None
    with pytest.raises(SpecError, match=r"sleep_mode=True needs device='cuda'.*Sleep mode is not supported"):
        Server.vllm("org/m", device="cpu", sleep_mode=True)
    with pytest.raises(SpecError, match=r"sleep_mode=True needs VLLM_SERVER_DEV_MODE=1, and env sets it to '0'"):
        Server.vllm("org/m", sleep_mode=True, env={"VLLM_SERVER_DEV_MODE": "0"})
    assert Server.vllm("org/m", sleep_mode=True, env={"VLLM_SERVER_DEV_MODE": "1"}).sleep_mode


def test_llamacpp_cannot_sleep_and_ollama_sleeps_as_booted() -> None:
    assert sleep_mode_for(Server.llamacpp("gemma3-270m")) is None
    spec = Server.ollama("gemma3-270m", num_parallel=2)
    mode = sleep_mode_for(spec)
    assert mode is not None
    assert mode.enable(spec) is spec
