"""The cross-process GPU lock with real processes: contention, FIFO order, a killed owner, timeouts."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import psutil
import pytest

from pytest_swarm.core.errors import LockTimeout
from pytest_swarm.engines.gpu_lock import GpuLock, Owner, hold_gpus

HOLDER = """
import sys, time
from pathlib import Path
from pytest_swarm.engines.gpu_lock import GpuLock
lock_dir, name, hold_s, log = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), Path(sys.argv[4])
with GpuLock(lock_dir, 0).hold(timeout_s=60):
    with open(log, "a") as out:
        out.write(f"{name} in {time.monotonic()}\\n")
    time.sleep(hold_s)
    with open(log, "a") as out:
        out.write(f"{name} out {time.monotonic()}\\n")
"""


def _holder(tmp_path: Path, name: str, hold_s: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / "locks"), name, str(hold_s), str(tmp_path / "log")]
    )


def _queue_length(tmp_path: Path) -> int:
    return len(list((tmp_path / "locks" / "gpu0").glob("*.ticket")))


def test_contending_processes_take_turns_in_fifo_order(tmp_path: Path) -> None:
    processes = []
    for name in "abcd":
        processes.append(_holder(tmp_path, name, 0.3))
        deadline = time.monotonic() + 20
        while _queue_length(tmp_path) < len(processes) and processes[-1].poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)  # the next one queues only after this one holds its ticket
    for process in processes:
        assert process.wait(timeout=60) == 0
    events = [line.split() for line in (tmp_path / "log").read_text().splitlines()]
    assert [name for name, kind, _ in events if kind == "in"] == list("abcd")
    for (n1, k1, _), (n2, k2, _) in zip(events[::2], events[1::2], strict=True):
        assert (n1, k1) == (n2, "in") and k2 == "out", "someone entered while another held the GPU"
    assert _queue_length(tmp_path) == 0


def test_a_killed_owner_is_recovered_and_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    owner = _holder(tmp_path, "victim", 3600)
    deadline = time.monotonic() + 20
    while not (tmp_path / "log").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait()
    lock = GpuLock(tmp_path / "locks", 0)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="pytest_swarm.engines.gpu_lock"), lock.hold(timeout_s=5):
        assert lock.owner() == Owner.me()
    assert time.monotonic() - started < 2
    assert f"removed the stale lock ticket of dead owner pid {owner.pid}" in caplog.text


def test_a_reused_pid_does_not_keep_a_dead_owners_lock(tmp_path: Path) -> None:
    """A ticket naming a live PID but another start time belonged to a process that is gone."""
    lock = GpuLock(tmp_path / "locks", 0)
    lock.queue.mkdir(parents=True)
    me = Owner.me()
    (lock.queue / f"{1:020d}-{me.pid}.ticket").write_bytes(
        orjson.dumps({"host": me.host, "pid": me.pid, "started": me.started - 100})
    )
    with lock.hold(timeout_s=2):
        assert lock.owner() == me


def test_waiting_past_the_timeout_names_the_holder(tmp_path: Path) -> None:
    owner = _holder(tmp_path, "holder", 3600)
    try:
        deadline = time.monotonic() + 20
        while not (tmp_path / "log").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        started = time.monotonic()
        with (
            pytest.raises(LockTimeout, match=rf"GPU 0 still taken after 0.3 s by pid {owner.pid} on "),
            GpuLock(tmp_path / "locks", 0).hold(timeout_s=0.3),
        ):
            pass
        assert time.monotonic() - started < 2
        assert _queue_length(tmp_path) == 1, "the waiter's own ticket is withdrawn"
    finally:
        owner.kill()
        owner.wait()


def test_several_gpus_are_taken_together_and_released(tmp_path: Path) -> None:
    with hold_gpus(tmp_path, [1, 0], timeout_s=1):
        assert GpuLock(tmp_path, 0).owner() == Owner.me() and GpuLock(tmp_path, 1).owner() == Owner.me()
    assert GpuLock(tmp_path, 0).owner() is None and GpuLock(tmp_path, 1).owner() is None


def test_owner_liveness_uses_start_time() -> None:
    me = Owner.me()
    assert me.alive()
    assert not Owner(me.host, me.pid, me.started + 50).alive()
    assert Owner("another-host", 1, 0.0).alive(), "cannot judge another host's processes"
    assert me.started == pytest.approx(psutil.Process().create_time())


def test_two_holders_in_one_process_share_its_turn_and_the_last_lets_go(tmp_path: Path) -> None:
    """An A/B item's two sides put on one GPU (co-located or sleeping) hold it together: the second holder, in another
    thread, gets it at once instead of queueing behind the first; the ticket stays until both let go, so another
    process waits for the last."""
    from concurrent.futures import ThreadPoolExecutor
    from contextlib import ExitStack

    locks = tmp_path / "locks"
    first, second = ExitStack(), ExitStack()
    with ThreadPoolExecutor(max_workers=2) as pool:  # both taken at once, as _boot_both does
        list(pool.map(lambda held: held.enter_context(hold_gpus(locks, [0], 2.0)), (first, second)))
    assert _queue_length(tmp_path) == 1, "one ticket for the process, not one a holder"
    first.close()
    owner = GpuLock(locks, 0).owner()
    assert owner is not None and owner.pid == os.getpid(), "the second holder still holds the GPU"
    waiter = _holder(tmp_path, "other", 0.0)
    time.sleep(1.0)
    assert waiter.poll() is None and not (tmp_path / "log").exists(), "another process waits while one holder is left"
    second.close()
    assert waiter.wait(timeout=30) == 0
    assert "other in" in (tmp_path / "log").read_text()
