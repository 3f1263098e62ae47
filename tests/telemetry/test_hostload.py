"""Other processes' CPU during a round: our own tree's CPU is ours, whatever happens to it meanwhile."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import namedtuple
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from pytest_swarm.telemetry import hostload
from pytest_swarm.telemetry.hostload import HostLoad, HostLoadProbe
from tests.cpu_cap import CAP_ENV, capped

pytestmark = pytest.mark.quiet  # reads the host's load: any other busy process on the machine is "other" load

BUSY_THEN_WAIT = """
import sys, time
end = time.process_time() + float(sys.argv[1])
while time.process_time() < end:
    pass
print("busy done", flush=True)
sys.stdin.readline()
"""


def test_a_child_that_exits_mid_round_is_not_charged_to_other_processes() -> None:
    """Its CPU from before the round must not turn into 'other' when it is gone at the stop (1.5 s of it here: 5 cores over 0.3 s)."""
    child = subprocess.Popen(
        [sys.executable, "-c", BUSY_THEN_WAIT, "1.5"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "busy done"
        probe = HostLoadProbe()
        assert child.stdin is not None
        child.stdin.write("\n")
        child.stdin.flush()
        child.wait(timeout=10)
        time.sleep(0.3)
        assert probe.stop().other_cores < 1.5
    finally:
        child.kill()


def test_a_busy_child_is_our_own_cpu() -> None:
    """A child burning a core through the whole round is ours, not another's: the others' load with it is what it was
    without it (read first, over as long), not a whole core more. A steady neighbour stays in both readings."""
    before = HostLoadProbe()
    time.sleep(0.6)
    without = before.stop().other_cores
    child = subprocess.Popen(
        [sys.executable, "-c", BUSY_THEN_WAIT, "0.6"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        time.sleep(0.05)
        probe = HostLoadProbe()
        assert child.stdout is not None and child.stdout.readline().strip() == "busy done"
        other = probe.stop().other_cores
        assert other < without + 0.9, (other, without)  # the child's core is not in it
    finally:
        child.kill()


def test_a_busy_child_in_a_process_group_of_its_own_is_the_servers_cpu() -> None:
    """process.py starts each server in a process group of its own: that is how the probe tells the servers' CPU from the load generators'."""
    child = subprocess.Popen(
        [sys.executable, "-c", BUSY_THEN_WAIT, "0.6"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        process_group=0,
    )
    try:
        time.sleep(0.05)
        started = time.perf_counter()
        probe = HostLoadProbe()
        assert child.stdout is not None and child.stdout.readline().strip() == "busy done"
        host = probe.stop()
        assert host.server_cores * (time.perf_counter() - started) > 0.5, (
            f"its 0.6 CPU-seconds, whatever else runs: {host}"
        )
        assert 0.0 <= host.idle_cores <= (os.cpu_count() or 1)
    finally:
        child.kill()


GRANDPARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
print(child.pid, flush=True)
time.sleep(30)
"""


def test_the_tree_holds_grandchildren_as_psutil_finds_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel's per-thread children lists give the tree psutil gives; without them (another kernel) psutil's answer is used."""
    child = subprocess.Popen([sys.executable, "-c", GRANDPARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        grandchild = int(child.stdout.readline())
        expected = {os.getpid(), child.pid, grandchild}
        assert expected <= {p.pid for p in hostload._own_tree()}
        assert {p.pid for p in hostload._own_tree()} == {
            os.getpid(),
            *(p.pid for p in psutil.Process().children(recursive=True)),
        }

        real_read_bytes = Path.read_bytes

        def no_children_lists(path: Path) -> bytes:
            if path.name == "children":
                raise FileNotFoundError(path)
            return real_read_bytes(path)

        monkeypatch.setattr(Path, "read_bytes", no_children_lists)
        assert hostload._descendants(os.getpid()) is None
        assert expected <= {p.pid for p in hostload._own_tree()}
    finally:
        for process in psutil.Process(child.pid).children(recursive=True):
            process.kill()
        child.kill()


def _orphan(command: str) -> psutil.Process:
    """A process whose shell parent has gone: not our descendant."""
    shell = subprocess.Popen(["sh", "-c", f"{command} & echo $!"], stdout=subprocess.PIPE, text=True)
    assert shell.stdout is not None
    orphan = psutil.Process(int(shell.stdout.readline()))
    shell.wait(timeout=10)
    return orphan


def _running_python_niced(process: psutil.Process) -> psutil.Process:
    """`process` once `nice` has set its priority and exec'd Python (a probe started before then reads nice 0)."""
    deadline = time.monotonic() + 10
    while process.nice() <= 0 or not process.name().startswith("python"):
        assert time.monotonic() < deadline, f"{process} never ran Python at a positive nice"
        time.sleep(0.01)
    return process


def _over(seconds: float) -> HostLoad:
    probe = HostLoadProbe()
    time.sleep(seconds)
    return probe.stop()


def test_a_busy_process_outside_our_tree_is_anothers() -> None:
    """The other side of the split: an orphan (its shell parent gone, so not our descendant) burning a core counts as another's."""
    code = "import time\nend = time.process_time() + 1.5\nwhile time.process_time() < end: pass"
    orphan = _orphan(f"{sys.executable} -c '{code}'")
    try:
        assert orphan.pid not in {p.pid for p in hostload._own_tree()}
        probe = HostLoadProbe()
        time.sleep(0.8)
        assert probe.stop().other_cores > 0.5
    finally:
        orphan.kill()


def test_steal_is_its_own_figure_and_guest_time_is_not_counted_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over 2 s: user +2.0 (1.5 of it running a guest VM, which /proc/stat also shows as guest), system +0.5, steal +1.0.

    Busy is user + system = 1.25 cores, not 2.0 with guest counted again; the 0.5 core the
    hypervisor took is steal, not another process's; idle + iowait +1.5 is 0.75 core idle.
    """
    times = namedtuple("times", "user nice system idle iowait irq softirq steal guest guest_nice")
    readings = iter(
        [
            times(100.0, 0.0, 50.0, 900.0, 5.0, 0.0, 1.0, 10.0, 20.0, 0.0),
            times(102.0, 0.0, 50.5, 901.0, 5.5, 0.0, 1.0, 11.0, 21.5, 0.0),
        ]
    )
    clock = iter([10.0, 12.0])
    monkeypatch.setattr(psutil, "cpu_times", lambda: next(readings))
    monkeypatch.setattr(hostload, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    monkeypatch.setattr(hostload, "_own_tree", list)
    monkeypatch.setattr(hostload, "_yielding", lambda tree: [])
    assert HostLoadProbe().stop() == HostLoad(other_cores=1.25, steal_cores=0.5, server_cores=0.0, idle_cores=0.75)


def test_a_process_at_a_lower_priority_in_our_session_yields_and_is_not_a_neighbour_while_our_own_stays_ours() -> None:
    """An orphan of our session spinning at nice 19 takes what we leave idle (the kernel gives ours the core first):
    its core is yielding, kept out of other processes' cores, which a pair's disturbance is judged by. A child of ours
    at nice 19 stays our own CPU. Each against a reading just before it, so a nice neighbour already there (the
    newcomer's scripted one) is the baseline."""
    code = "import time\nend = time.process_time() + 1.5\nwhile time.process_time() < end: pass"
    before = _over(0.5)
    orphan = _running_python_niced(_orphan(f"nice -n 19 {sys.executable} -c '{code}'"))
    try:
        load = _over(0.8)
        assert load.yielding_cores > before.yielding_cores + 0.5, (before, load)
        assert load.other_cores < before.other_cores + 0.5, (before, load)
    finally:
        orphan.kill()
    before = _over(0.5)
    child = subprocess.Popen(["nice", "-n", "19", sys.executable, "-c", code])
    try:
        _running_python_niced(psutil.Process(child.pid))
        load = _over(0.8)
        assert load.yielding_cores < before.yielding_cores + 0.5, (before, load)
    finally:
        child.kill()
        child.wait(timeout=10)


def test_a_nice_process_in_another_session_is_a_neighbour_where_autogroups_weigh_sessions() -> None:
    """With autogroups on, the kernel weighs another session as one, whatever its processes' nice: such a process
    takes its session's share, and counts as another's CPU; one of our own session yields."""
    if not hostload._autogroups_on():
        pytest.skip("autogroups are off here: every nice process yields")
    ours = _orphan(f"nice -n 19 {sys.executable} -c 'import time; time.sleep(5)'")
    theirs = _orphan(f"setsid nice -n 19 {sys.executable} -c 'import time; time.sleep(5)'")
    try:
        _running_python_niced(ours)
        _running_python_niced(theirs)
        found = {p.pid for p in hostload._yielding(hostload._own_tree())}
        assert ours.pid in found and theirs.pid not in found, (ours, theirs, found)
    finally:
        ours.kill()
        theirs.kill()


def test_no_process_yields_to_a_tree_split_across_scheduling_groups() -> None:
    """A server held in a cgroup of its own (a CPU cap) is weighed as that group: a nice process of our session
    competes with it as an equal, and counts as another's CPU."""
    niced = _running_python_niced(_orphan(f"nice -n 19 {sys.executable} -c 'import time; time.sleep(5)'"))
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(5)"], env={**os.environ, CAP_ENV: "swarm-hostload-split"}
    )
    try:
        assert niced.pid in {p.pid for p in hostload._yielding(hostload._own_tree())}
        with capped("swarm-hostload-split", 2.0) as moved:
            deadline = time.monotonic() + 10
            while child.pid not in moved:
                assert time.monotonic() < deadline, "the cap never took the child"
                time.sleep(0.05)
            assert hostload._yielding(hostload._own_tree()) == []
    finally:
        niced.kill()
        child.kill()
        child.wait(timeout=10)
