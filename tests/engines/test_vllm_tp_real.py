"""Tensor parallelism and a MoE model on the vLLM CPU build: two ranks, one a core, serving the MoE made here.

`Server.vllm("qwen3-moe-tiny", tensor_parallel=2, cpus=[0, 1], device="cpu")` runs vLLM's multiprocess executor
with a worker a rank (VLLM::Worker_TP0 and _TP1), each rank's OpenMP threads bound to its core
(VLLM_CPU_OMP_THREADS_BIND="0|1"). What the plugin does with a server must hold for that tree, checked on one boot
while a real item plays on it: pinning, loopback, memory of every process, shared memory, then a rank killed mid-round
named in the item's failure and nothing of the tree left. (A MoE the CPU build cannot serve: its worker's words, from
vLLM's real log, are found above the API server's in tests/engines/test_specs.py.) The prefix-cache counters, the SIGTERM and the harness's CPUs given back are the
one-rank server's (tests/engines/test_vllm_real.py): the scheduler, not a rank, keeps them. The vLLM environment is
the one test_vllm_real.py uses; without it these fail saying how to make it.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from pytest_swarm import Server
from pytest_swarm._util.affinity import cpu_list
from pytest_swarm.engines.keeper import shared_memory_files
from pytest_swarm.engines.registry import booted_anywhere
from pytest_swarm.telemetry.memory import tree_memory
from tests.conftest import servers_left
from tests.engines.test_vllm_real import _alive, _tree_of, _vllm_processes, vllm_executable

pytestmark = [
    pytest.mark.e2e(reason="vLLM's real ranks: binding, loopback, memory, shared memory, a rank's death"),
    pytest.mark.functional,
]

CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
CPUS = sorted(os.sched_getaffinity(0))[-2:]
"""The two ranks' cores: the last two this process may use (both, on two cores)."""
TWO_CPUS = pytest.mark.skipif(len(CPUS) < 2, reason=f"TP=2 binds a rank a core; this machine offers {len(CPUS)}")
SPEC_ARGS: dict[str, Any] = {
    "max_num_seqs": 4,
    "enforce_eager": True,
    "max_model_len": 1024,
    "device": "cpu",
    "env": CPU_ENV,
}


def test_a_tp2_cpu_spec_binds_a_rank_a_core_and_says_so_in_its_label() -> None:
    """No boot: the binding the spec derives from its CPUs, and the errors of a binding that cannot hold."""
    spec = Server.vllm("qwen3-moe-tiny", tensor_parallel=2, cpus=[0, 1], **SPEC_ARGS)
    assert dict(spec.env)["VLLM_CPU_OMP_THREADS_BIND"] == "0|1"
    assert spec.label == "vllm:qwen3-moe-tiny x4 cpus=0-1 tp2 ranks=0|1"
    assert booted_anywhere(spec) is not None, "bound by name within its CPUs: it may boot on every CPU"


FAULTS = """
import pytest
from pytest_swarm import Server

ARGS = {args!r}

# A rank killed mid-round (the test kills VLLM::Worker_TP1 once an answer streams): the item fails naming it.
@pytest.mark.swarm(server=Server.vllm("qwen3-moe-tiny", tensor_parallel=2, cpus={cpus!r}, **ARGS),
                   concurrency=4, max_tokens=64, rounds=20, warmup=False)
def test_rank_killed(swarm):
    swarm.run()
"""


def _titled(process: psutil.Process, title: str) -> bool:
    """Whether `process` retitled itself `title`; False once it is gone (a process of the booting tree may exit
    between the listing and the look, as vLLM's short-lived helpers do)."""
    with contextlib.suppress(psutil.Error):
        command: list[str] = process.cmdline()
        return bool(command) and command[0].startswith(title)
    return False


def _answered(logs: Path) -> int:
    """The answers the servers' logs under `logs` show so far. The inner run creates and removes temporary folders
    there as it goes: one removed between rglob's listing and its scan counts as none this time (seen once, as a
    FileNotFoundError out of rglob), and the next look counts again."""
    try:
        return sum(log.read_text(errors="replace").count('"POST /v1/completions') for log in logs.rglob("vllm-*.log"))
    except FileNotFoundError:
        return 0


@dataclass
class TreeSeen:
    """What the TP=2 tree showed while it served, looked at once, just before a rank was killed."""

    titles: set[str]
    masks: set[frozenset[int]]
    rank_masks: dict[str, set[frozenset[int]]]
    """Each rank's threads' CPU masks, by its title."""
    addresses: set[str]
    ranks_connected: bool
    rss_mib: float
    pss_mib: float | None
    ranks_rss_mib: float
    shared: set[Path]
    log: str
    """The serving server's log so far (the inner run removes its log folders as it ends)."""


def _look(tree: list[psutil.Process], logs: Path) -> TreeSeen:
    """The serving tree as the plugin's own readers see it (memory by the sampler's sum over the tree)."""
    alive = _alive(tree)
    titles = {p.cmdline()[0].split()[0] for p in alive if p.cmdline()}
    workers = [p for p in alive if _titled(p, "VLLM::Worker_TP")]
    connections = [c for p in alive for c in p.net_connections(kind="inet")]
    top = [p for p in alive if p.ppid() not in {q.pid for q in alive}]
    rss, pss = tree_memory([p.pid for p in top])
    return TreeSeen(
        titles=titles,
        masks={frozenset(os.sched_getaffinity(t.id)) for p in alive for t in p.threads()},
        rank_masks={
            p.cmdline()[0].split()[0]: {frozenset(os.sched_getaffinity(t.id)) for t in p.threads()} for p in workers
        },
        addresses={c.laddr.ip for c in connections} | {c.raddr.ip for c in connections if c.raddr},
        ranks_connected=len(workers) == 2 and all(p.net_connections(kind="inet") for p in workers),
        rss_mib=rss,
        pss_mib=pss,
        ranks_rss_mib=sum(p.memory_info().rss for p in workers) / 2**20,
        shared=shared_memory_files(p.pid for p in alive),
        log="".join(
            text for path in logs.rglob("vllm-*.log") if "qwen3-moe-tiny" in (text := path.read_text(errors="replace"))
        ),
    )


def _server_tree(run_pid: int) -> list[psutil.Process]:
    """The vLLM processes under the inner pytest (its keeper and what that started), not the pytest itself."""
    return [p for p in _tree_of(run_pid) if _titled(p, "VLLM") or "vllm" in " ".join(_command(p)).lower()]


def _command(process: psutil.Process) -> list[str]:
    with contextlib.suppress(psutil.Error):
        command: list[str] = process.cmdline()
        return command
    return []


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temporary folder with a short path: vLLM's ZMQ IPC sockets live under TMPDIR, and a socket's path must fit in
    107 characters (a pytest-xdist worker's tmp_path does not)."""
    with tempfile.TemporaryDirectory(prefix="swarm-tp2-") as folder:
        yield Path(folder)


@TWO_CPUS
def test_a_tp2_tree_pinned_on_loopback_counted_whole_and_a_rank_killed_mid_round_fails_the_item_naming_it(
    pytester: pytest.Pytester, tagged: str, tmp_path: Path, short_tmp: Path
) -> None:
    """One TP=2 boot for every look at its tree (a boot is a minute of both cores), then the rank's death."""
    pytester.makepyfile(test_faults=FAULTS.format(args=SPEC_ARGS, cpus=CPUS))
    logs = short_tmp
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-v",
            "-p",
            "no:cacheprovider",
            "--swarm-hardware=testbox",
            f"--swarm-vllm={vllm_executable()}",
            "--swarm-json=out.json",
        ],
        cwd=pytester.path,
        env={**os.environ, "TMPDIR": str(logs)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    tree: list[psutil.Process] = []
    seen: TreeSeen | None = None
    killed = None
    started = time.time()
    try:
        deadline = time.monotonic() + 900
        while killed is None:
            assert time.monotonic() < deadline and run.poll() is None, "no answer of the TP=2 server ever streamed"
            tree = _tree_of(run.pid)
            ranks = [p for p in _alive(tree) if _titled(p, "VLLM::Worker_TP1")]
            answered = _answered(logs)
            if ranks and answered >= 9:  # two rounds of four answered, the third's first streaming: mid-round
                seen = _look(_server_tree(run.pid), logs)
                killed = ranks[0].pid
                ranks[0].kill()
            time.sleep(0.5)
        out, _ = run.communicate(timeout=300)
    finally:
        run.kill()
        for process in _alive(tree):
            with contextlib.suppress(psutil.Error):
                process.kill()
    (tmp_path / "out.txt").write_text(out)
    print(out[-8000:])

    # the tree while it served: a worker a rank, every thread on the spec's CPUs, each rank's threads on its core
    assert seen is not None
    assert {"VLLM::Worker_TP0", "VLLM::Worker_TP1"} <= seen.titles, seen.titles
    assert all(mask <= frozenset(CPUS) for mask in seen.masks), seen.masks
    assert frozenset([CPUS[0]]) in seen.rank_masks["VLLM::Worker_TP0"], seen.rank_masks
    assert frozenset([CPUS[1]]) in seen.rank_masks["VLLM::Worker_TP1"], seen.rank_masks
    assert f"VLLM_CPU_OMP_THREADS_BIND={CPUS[0]}|{CPUS[1]}" in seen.log.replace("'", "")
    assert f"local_rank=0, core ids=[{CPUS[0]}]" in seen.log and f"local_rank=1, core ids=[{CPUS[1]}]" in seen.log
    assert "Qwen3MoeForCausalLM" in seen.log, "vLLM loaded the MoE architecture"
    # every process, the ranks' gloo group (GLOO_SOCKET_IFNAME) and vLLM's ZMQ (VLLM_HOST_IP) included, on loopback
    assert seen.addresses == {"127.0.0.1"} and seen.ranks_connected, seen.addresses
    # the sampler's sum over the tree is more than the ranks hold, each rank its half of the weights
    assert seen.pss_mib is not None and seen.rss_mib > seen.ranks_rss_mib > 2 * 100, seen
    assert any(path.name.endswith("cpushm_1") for path in seen.shared), seen.shared

    # the rank's death: the item's failure
    assert "test_faults.py::test_rank_killed FAILED" in out
    assert f"swarm gate FAIL\n  hard limit broken: server 0 (vllm:qwen3-moe-tiny x4 cpus={cpu_list(CPUS)} tp2 " in out
    assert f"the first of its processes to die: VLLM::Worker_TP1 (pid {killed})" in out, "the rank, not what followed"
    document = json.loads((pytester.path / "out.json").read_text())
    tests = {t["nodeid"].rsplit("::", 1)[-1]: t for t in document["tests"]}
    figures = tests["test_rank_killed"]["figures"]
    assert tests["test_rank_killed"]["rounds"] == 20 and figures["requests"] == 80, "every round kept, failed or not"
    assert 8 <= figures["requests"] - figures["failures"] < 80 and figures["output_tokens"] >= 8 * 64, figures

    # nothing of the tree left, its shared memory included
    assert _alive(tree) == [] and _vllm_processes(tagged) == [] and servers_left(tagged) == []
    assert [path for path in seen.shared if path.exists()] == [], "the ranks' all-reduce buffers go with them"
    mapped = shared_memory_files(psutil.pids())  # another session's live vLLM keeps its own
    left = [p for p in Path("/dev/shm").glob("vllm_dist_*") if p.stat().st_mtime > started and p not in mapped]
    assert left == [], "the rendezvous files go with them"
