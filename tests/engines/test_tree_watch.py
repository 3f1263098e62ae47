"""A server's tree watched (engines/tree_watch.py) and a TP spec's rank binding (engines/vllm.py), without vLLM.

Real processes: a parent that starts two children and maps a /dev/shm file, as vLLM's EngineCore starts a worker a
rank and the ranks map their all-reduce buffers; one child killed, then the rest. The crash report must name the one
that died first. tests/engines/test_vllm_tp_real.py does the same to vLLM itself.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from pytest_swarm import Server
from pytest_swarm.client.base import Endpoint
from pytest_swarm.engines import pool as pool_module
from pytest_swarm.engines.keeper import SHM, shared_memory_files, unlink_orphaned
from pytest_swarm.engines.pool import ServerPool
from pytest_swarm.engines.process import RunningServer, ServerProcess
from pytest_swarm.engines.tree_watch import TreeWatch, title
from pytest_swarm.engines.vllm import VllmSpec
from pytest_swarm.engines.vllm_cpu import split_cpus
from pytest_swarm.settings import LaunchSettings, LockSettings
from pytest_swarm.specs import SpecError

FAMILY = """
import mmap, os, subprocess, sys, time
children = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"]) for _ in range(2)]
with open(sys.argv[1], "w+b") as f:
    f.truncate(4096)
    view = mmap.mmap(f.fileno(), 4096)
print(" ".join(str(c.pid) for c in children), flush=True)
time.sleep(300)
"""


def _tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [*root.children(recursive=True), root]


@pytest.fixture
def shm_file() -> Iterator[Path]:
    path = SHM / f"pytest-swarm-test-{os.getpid()}-{time.monotonic_ns()}"
    yield path
    path.unlink(missing_ok=True)


def test_the_watch_names_the_first_process_to_die_first_and_the_shm_file_goes_once_unmapped(
    tmp_path: Path, shm_file: Path
) -> None:
    process = ServerProcess([sys.executable, "-c", FAMILY, str(shm_file)], tmp_path / "family.log")
    try:
        deadline = time.monotonic() + 30
        while len(_tree(process.pid)) < 3 or shm_file not in shared_memory_files([process.pid]):
            assert time.monotonic() < deadline, "the family never came up"
            time.sleep(0.05)
        process.watch_tree()
        first, second = _tree(process.pid)[:2]
        assert process.lost() == []
        first.kill()
        time.sleep(0.5)  # more than a look apart
        second.kill()
        deadline = time.monotonic() + 10
        while len(process.lost()) < 2:
            assert time.monotonic() < deadline, process.lost()
            time.sleep(0.05)
        assert process.lost() == [f"{title(first)} (pid {first.pid})", f"{title(second)} (pid {second.pid})"]
    finally:
        process.stop(grace_s=2)
    assert not shm_file.exists(), "mapped by the tree when watched, mapped by nobody once it stopped: removed"


def test_a_crash_report_names_the_first_process_of_the_tree_that_died(
    tmp_path: Path, shm_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    process = ServerProcess([sys.executable, "-c", FAMILY, str(shm_file)], tmp_path / "family.log")
    server = RunningServer(Endpoint("http://127.0.0.1:9", "m"), process)
    monkeypatch.setattr(pool_module, "launch", lambda spec, settings, index: server)
    pool = ServerPool(LaunchSettings(tmp_path), LockSettings(tmp_path / "locks"))
    try:
        deadline = time.monotonic() + 30
        while len(_tree(process.pid)) < 3:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        process.watch_tree()
        pool.get(Server.vllm("m", device="cpu"))
        assert pool.crash_report() is None
        child = _tree(process.pid)[0]
        child.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 10
        while (report := pool.crash_report()) is None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert f"server 0 (vllm:m x256, pid {process.pid}) the first of its processes to die: " in report
        assert f"{title(child)} (pid {child.pid})" in report and "died during the run" not in report, report
    finally:
        pool.stop()


def test_a_file_another_process_still_maps_is_left(tmp_path: Path, shm_file: Path) -> None:
    process = ServerProcess([sys.executable, "-c", FAMILY, str(shm_file)], tmp_path / "family.log")
    try:
        deadline = time.monotonic() + 30
        while shm_file not in shared_memory_files([process.pid]):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert unlink_orphaned({shm_file}) == [] and shm_file.exists()
    finally:
        process.stop(grace_s=2)
    assert shm_file.exists(), "an unwatched server's stop removes nothing"
    assert unlink_orphaned({shm_file}) == [shm_file] and not shm_file.exists(), "mapped by nobody now: removed"


def test_a_watched_process_that_ends_is_reported_once_and_a_closed_watch_stops_looking() -> None:
    child = psutil.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=-1)
    watch = TreeWatch([child])
    assert watch.lost() == []
    assert child.stdin is not None
    child.stdin.close()
    child.wait()
    assert watch.lost() == [f"python (pid {child.pid})"] or watch.lost()[0].endswith(f"(pid {child.pid})")
    assert len(watch.lost()) == 1
    watch.close()


# --- a TP spec on a CPU: a rank a core ---


def test_a_cpu_spec_of_two_ranks_binds_one_a_core_of_its_cpus_and_its_label_says_so() -> None:
    spec = Server.vllm("m", tensor_parallel=2, cpus=[0, 1], device="cpu")
    assert isinstance(spec, VllmSpec)
    assert dict(spec.env)["VLLM_CPU_OMP_THREADS_BIND"] == "0|1"
    assert spec.label == "vllm:m x256 cpus=0-1 tp2 ranks=0|1"
    assert split_cpus((0, 1, 2), 2) == "0-1|2" and split_cpus((0, 1, 2, 3), 2) == "0-1|2-3", "the first ranks larger"
    assert split_cpus((4, 6, 7), 3) == "4|6|7"
    one = Server.vllm("m", cpus=[1], device="cpu")
    assert "VLLM_CPU_OMP_THREADS_BIND" not in dict(one.env) and one.label == "vllm:m x256 cpus=1"
    gpu = Server.vllm("m", tensor_parallel=2)
    assert gpu.label == "vllm:m x256 tp2" and "VLLM_CPU_OMP_THREADS_BIND" not in dict(gpu.env)


def test_a_binding_the_spec_names_is_kept_when_it_holds_and_refused_when_it_cannot() -> None:
    named = Server.vllm("m", tensor_parallel=2, cpus=[0, 1], device="cpu", env={"VLLM_CPU_OMP_THREADS_BIND": "1|0"})
    assert dict(named.env)["VLLM_CPU_OMP_THREADS_BIND"] == "1|0"
    auto = Server.vllm("m", tensor_parallel=2, device="cpu", env={"VLLM_CPU_OMP_THREADS_BIND": "auto"})
    assert dict(auto.env)["VLLM_CPU_OMP_THREADS_BIND"] == "auto", "vLLM's own: a NUMA node a rank"
    with pytest.raises(SpecError, match=r"names 1 cpulist\(s\), and tensor_parallel=2 needs one a rank"):
        Server.vllm("m", tensor_parallel=2, cpus=[0, 1], device="cpu", env={"VLLM_CPU_OMP_THREADS_BIND": "0-1"})
    with pytest.raises(SpecError, match=r"binds CPUs outside cpus=0"):
        Server.vllm("m", tensor_parallel=2, cpus=[0], device="cpu", env={"VLLM_CPU_OMP_THREADS_BIND": "0|1"})
    with pytest.raises(SpecError, match=r"tensor_parallel=2 on a CPU binds each rank to CPUs of its own: name them"):
        Server.vllm("m", tensor_parallel=2, cpus=[0], device="cpu")
    with pytest.raises(SpecError, match=r"got cpus=\[\]"):
        Server.vllm("m", tensor_parallel=2, device="cpu")
