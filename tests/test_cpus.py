"""`cpus=` on a server spec: validated against this machine, in the label, pinned before exec for the server's whole tree,
and the harness moved to the other CPUs while it runs, then given them back."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm import ExternalSpec, Server, SpecError
from pytest_swarm._util.affinity import AFFINITY, cpu_list, harness_cpus
from pytest_swarm.engines import llamacpp
from pytest_swarm.engines.process import ServerProcess
from pytest_swarm.engines.registry import launch
from pytest_swarm.settings import LaunchSettings
from tests.conftest import servers_left

AVAILABLE = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else frozenset()
needs_two = pytest.mark.skipif(len(AVAILABLE) < 2, reason="pinning apart needs two CPUs this process may use")

# --- pure parts -----------------------------------------------------------------


def _parse(text: str) -> set[int]:
    found: set[int] = set()
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        found.update(range(int(low), int(high or low) + 1))
    return found


@given(st.sets(st.integers(0, 300), max_size=40))
def test_the_cpu_list_is_linux_cpulist_form_and_says_every_cpu_once(cpus: set[int]) -> None:
    text = cpu_list(cpus)
    assert _parse(text) == cpus
    assert "--" not in text and not any(a == b for a, b in (p.split("-") for p in text.split(",") if "-" in p))


def test_the_cpu_list_joins_runs() -> None:
    assert cpu_list([8, 0, 1, 2, 3]) == "0-3,8" and cpu_list([1]) == "1" and cpu_list([]) == ""


@given(st.sets(st.integers(0, 15), min_size=1), st.lists(st.sets(st.integers(0, 15)), max_size=3))
def test_the_harness_gets_what_no_server_holds_and_never_nothing(available: set[int], servers: list[set[int]]) -> None:
    left = harness_cpus(frozenset(available), servers)
    assert left and left <= available
    held = set().union(*servers)
    assert left == (available - held or available)


# --- the spec -------------------------------------------------------------------


def test_cpus_are_distinct_cpu_indices_in_any_order_and_part_of_the_label() -> None:
    cpu = max(AVAILABLE)
    spec = Server.llamacpp(cpus=[cpu])
    assert (
        spec.cpus == (cpu,) and spec.label == f"llamacpp:gemma3-270m x1 cpus={cpu}" and spec.describe()["cpus"] == [cpu]
    )
    assert spec != Server.llamacpp(), (
        "a pinned server is another server: its figures never join the unpinned one's baseline"
    )
    assert Server.llamacpp(cpus=sorted(AVAILABLE)) == Server.llamacpp(cpus=sorted(AVAILABLE, reverse=True))
    assert (
        Server.vllm("m", cpus=(cpu,)).cpus
        == Server.sglang("m", cpus=[cpu]).cpus
        == Server.ollama(cpus=[cpu]).cpus
        == (cpu,)
    )
    for bad in ("1", [-1], [True], [1.0], [cpu, cpu]):
        with pytest.raises(SpecError, match=r"cpus must be distinct CPU indices \(ints >= 0\) such as cpus=\[1\]"):
            Server.llamacpp(cpus=bad)  # type: ignore[arg-type]


def test_cpus_this_machine_does_not_offer_name_the_spec_and_the_cpus_it_has() -> None:
    missing = max(AVAILABLE) + 1
    with pytest.raises(SpecError) as caught:
        Server.vllm("m", max_num_seqs=4, cpus=[missing])
    assert str(caught.value) == (
        f"vllm:m x4 cpus={missing}: cpus=[{missing}] names CPUs this machine does not offer ({missing}); available: {cpu_list(AVAILABLE)}"
    )


def test_an_external_server_cannot_be_pinned() -> None:
    with pytest.raises(SpecError, match="an external server's CPUs are not ours to set"):
        ExternalSpec(engine="external", model="m", url="http://127.0.0.1:8000", cpus=(min(AVAILABLE),))


def test_llamacpp_threads_default_to_one_per_pinned_cpu() -> None:
    """llama.cpp counts the machine's cores, not the CPUs it may use: more threads than CPUs stall each step."""
    cpu = max(AVAILABLE)
    assert llamacpp.server_argv(Server.llamacpp(cpus=[cpu]), "m.gguf", 1)[-2:] == ["--threads", "1"]
    assert llamacpp.server_argv(Server.llamacpp(cpus=[cpu], threads=3), "m.gguf", 1)[-2:] == ["--threads", "3"], (
        "a given count wins"
    )
    assert "--threads" not in llamacpp.server_argv(Server.llamacpp(), "m.gguf", 1), "unpinned: llama.cpp's own choice"


# --- the processes --------------------------------------------------------------

TREE = """
import os, subprocess, sys, time
child = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"], capture_output=True, text=True)
print("server", sorted(os.sched_getaffinity(0)), "child", child.stdout.strip(), flush=True)
time.sleep(60)
"""


def _threads() -> set[frozenset[int]]:
    """The masks of every thread of this process: the harness is pinned as a whole, not just the calling thread."""
    masks = set()
    for task in Path("/proc/self/task").iterdir():
        try:
            masks.add(frozenset(os.sched_getaffinity(int(task.name))))
        except ProcessLookupError:
            continue
    return masks


def _started(path: Path) -> str:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if "child" in text:
            return text.strip()
        time.sleep(0.05)
    raise AssertionError(f"no line from the server in {path}")


@pytest.fixture
def restored() -> Iterator[None]:
    """Whatever a test leaves, the harness is back on every CPU it had."""
    yield
    assert _threads() == {AVAILABLE}


@needs_two
def test_a_pinned_server_and_what_it_starts_run_on_its_cpus_and_the_harness_on_the_others_until_it_stops(
    tmp_path: Path, restored: None
) -> None:
    server_cpu = max(AVAILABLE)
    rest = sorted(AVAILABLE - {server_cpu})
    process = ServerProcess([sys.executable, "-c", TREE], tmp_path / "pinned.log", cpus=(server_cpu,))
    try:
        assert _started(tmp_path / "pinned.log") == f"server [{server_cpu}] child [{server_cpu}]", (
            "pinned before exec: its children inherit"
        )
        assert _threads() == {frozenset(rest)}, "every thread of the harness moved off the server's CPU"
        spawned = subprocess.run(
            [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"], capture_output=True, text=True
        )
        assert spawned.stdout.strip() == str(rest), "a load generator started now inherits the harness's CPUs"
        unpinned = ServerProcess([sys.executable, "-c", TREE], tmp_path / "unpinned.log")
        try:
            everything = sorted(AVAILABLE)
            assert _started(tmp_path / "unpinned.log") == f"server {everything} child {everything}", (
                "not the harness's narrowed mask"
            )
        finally:
            unpinned.stop()
        assert _threads() == {frozenset(rest)}, "an unpinned server's stop leaves the pinning alone"
    finally:
        process.stop()
    assert _threads() == {AVAILABLE}
    process.stop()
    assert _threads() == {AVAILABLE}, "a second stop gives nothing back twice"


@needs_two
def test_a_spec_made_while_the_harness_is_pinned_is_checked_against_every_cpu_this_process_had(
    tmp_path: Path, restored: None
) -> None:
    process = ServerProcess([sys.executable, "-c", TREE], tmp_path / "pinned.log", cpus=(max(AVAILABLE),))
    try:
        _started(tmp_path / "pinned.log")
        assert AFFINITY.available() == AVAILABLE
        assert Server.llamacpp(cpus=[max(AVAILABLE)]).cpus == (max(AVAILABLE),)
    finally:
        process.stop()


THREADED_TREE = """
import os, subprocess, sys, threading, time
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
child = subprocess.Popen([sys.executable, "-c", "import threading, time; "
    "threading.Thread(target=time.sleep, args=(60,), daemon=True).start(); time.sleep(60)"])
print("server", sorted(os.sched_getaffinity(0)), "child", child.pid, flush=True)
time.sleep(60)
"""


def _tree_masks(pid: int) -> set[frozenset[int]]:
    root = psutil.Process(pid)
    return {frozenset(os.sched_getaffinity(t.id)) for p in [root, *root.children(recursive=True)] for t in p.threads()}


@needs_two
def test_a_server_booted_anywhere_starts_on_every_cpu_and_pin_moves_every_thread_of_its_tree(
    tmp_path: Path, restored: None
) -> None:
    """`boot_anywhere`: the boot has the cores the measurement leaves idle; `pin()` then moves every thread of every
    process the server started (not only each process's first thread, which is all sched_setaffinity(pid) moves)."""
    server_cpu = max(AVAILABLE)
    log = tmp_path / "anywhere.log"
    process = ServerProcess([sys.executable, "-c", THREADED_TREE], log, cpus=(server_cpu,), boot_anywhere=True)
    try:
        assert _started(log).startswith(f"server {sorted(AVAILABLE)} child"), "started on every CPU"
        assert _threads() == {AVAILABLE - {server_cpu}}, "the harness is off the server's CPUs all the same"
        deadline = time.monotonic() + 20
        while (
            len(psutil.Process(process.pid).children()) < 1
            or sum(p.num_threads() for p in [psutil.Process(process.pid), *psutil.Process(process.pid).children()]) < 4
        ):
            assert time.monotonic() < deadline, "the child and its thread never started"
            time.sleep(0.05)
        assert _tree_masks(process.pid) == {AVAILABLE}
        process.pin()
        assert _tree_masks(process.pid) == {frozenset({server_cpu})}, "every thread of the tree pinned"
    finally:
        process.stop()
    assert _threads() == {AVAILABLE}


@pytest.mark.e2e(reason="the embedded engine's every thread on its CPUs while it serves")
@needs_two
def test_the_embedded_engine_runs_every_thread_on_its_cpu_and_serves_while_the_harness_keeps_the_others(
    tmp_path: Path, tagged: str, restored: None
) -> None:
    server_cpu = max(AVAILABLE)
    server = launch(Server.llamacpp(cpus=[server_cpu]), LaunchSettings(log_dir=tmp_path))
    try:
        root = psutil.Process(server.process.pid)
        masks = {
            frozenset(os.sched_getaffinity(t.id)) for p in [root, *root.children(recursive=True)] for t in p.threads()
        }
        assert masks == {frozenset({server_cpu})}, "llama.cpp's threads, started after exec, inherit the mask"
        assert server.process.argv[-2:] == ["--threads", "1"]
        assert _threads() == {AVAILABLE - {server_cpu}}
        answer = httpx.post(
            server.endpoint.base_url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 2}, timeout=30.0
        )
        assert answer.status_code == 200, answer.text
    finally:
        server.stop()
    assert servers_left(tagged) == []
