"""Tensor parallelism and a MoE model on the vLLM CPU build: two ranks, one a core, serving the MoE made here.

`Server.vllm("qwen3-moe-tiny", tensor_parallel=2, cpus=[0, 1], device="cpu")` runs vLLM's multiprocess executor
with a worker a rank (VLLM::Worker_TP0 and _TP1), each rank's OpenMP threads bound to its core
(VLLM_CPU_OMP_THREADS_BIND="0|1"). What the plugin does with a server must hold for that tree: pinning (booted on
every CPU, pinned once ready), memory of every process, the prefix-cache counters, SIGTERM with nothing left, and a
rank that dies mid-round named in the item's failure. A MoE the CPU build cannot serve fails its item before any
round, in vLLM's own words. The vLLM environment is the one tests/engines/test_vllm_real.py uses; without it these
fail saying how to make it. Each boot costs about a minute of both cores.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from pytest_swarm import Server
from pytest_swarm._util.affinity import AFFINITY, cpu_list
from pytest_swarm.engines.keeper import shared_memory_files
from pytest_swarm.engines.process import RunningServer
from pytest_swarm.engines.registry import booted_anywhere, launch
from pytest_swarm.engines.vllm import VllmSpec
from pytest_swarm.engines.vllm_served import PREFIX_CACHE_SERIES
from pytest_swarm.settings import LaunchSettings
from pytest_swarm.telemetry.counters import ServerProbe, counter_increases
from pytest_swarm.telemetry.memory import tree_memory
from pytest_swarm.telemetry.server_metrics import parse_snapshot
from tests.conftest import servers_left
from tests.engines.test_vllm_real import LONG_PROMPTS, _alive, _names, _tree_of, _vllm_processes, vllm_executable

pytestmark = pytest.mark.e2e(reason="vLLM's real ranks: binding, loopback, memory, shared memory, a rank's death")

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


def tp2_spec() -> VllmSpec:
    spec = Server.vllm("qwen3-moe-tiny", tensor_parallel=2, cpus=CPUS, **SPEC_ARGS)
    assert isinstance(spec, VllmSpec)
    return spec


def test_a_tp2_cpu_spec_binds_a_rank_a_core_and_says_so_in_its_label() -> None:
    """No boot: the binding the spec derives from its CPUs, and the errors of a binding that cannot hold."""
    spec = Server.vllm("qwen3-moe-tiny", tensor_parallel=2, cpus=[0, 1], **SPEC_ARGS)
    assert dict(spec.env)["VLLM_CPU_OMP_THREADS_BIND"] == "0|1"
    assert spec.label == "vllm:qwen3-moe-tiny x4 cpus=0-1 tp2 ranks=0|1"
    assert booted_anywhere(spec) is not None, "bound by name within its CPUs: it may boot on every CPU"


@pytest.fixture(scope="module")
def tp2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """One TP=2 MoE server for the in-process checks, booted on every CPU and pinned once ready, as an A/B search boots
    such a side."""
    settings = LaunchSettings(
        log_dir=tmp_path_factory.mktemp("vllm-tp-logs"), boot_timeout_s=600, vllm=vllm_executable()
    )
    spec = tp2_spec()
    server = launch(booted_anywhere(spec) or spec, settings)
    try:
        yield server
    finally:
        server.stop()


def _tree(server: RunningServer) -> list[psutil.Process]:
    root = psutil.Process(server.process.pid)
    return [root, *root.children(recursive=True)]


@TWO_CPUS
def test_two_ranks_run_a_worker_each_bound_to_its_core_the_tree_pinned_to_the_specs_cpus(tp2: RunningServer) -> None:
    tree = _tree(tp2)
    names = _names(tree)
    assert {"VLLM::Worker_TP0", "VLLM::Worker_TP1"} <= {p.cmdline()[0].split()[0] for p in tree}, names
    masks = {frozenset(os.sched_getaffinity(t.id)) for p in tree for t in p.threads()}
    assert masks == {frozenset(CPUS)}, masks
    log = tp2.process.log_path.read_text()
    bind = f"{CPUS[0]}|{CPUS[1]}"
    assert f"VLLM_CPU_OMP_THREADS_BIND={bind!r}" in log
    assert f"local_rank=0, core ids=[{CPUS[0]}]" in log and f"local_rank=1, core ids=[{CPUS[1]}]" in log
    assert tp2.info["tensor_parallel"] == 2
    assert "Qwen3MoeForCausalLM" in log, "vLLM loaded the MoE architecture"


@TWO_CPUS
def test_the_ranks_and_every_other_process_talk_on_loopback_only(tp2: RunningServer) -> None:
    """The ranks' gloo group (GLOO_SOCKET_IFNAME, the loopback interface) and vLLM's ZMQ (VLLM_HOST_IP) included."""
    tree = _tree(tp2)
    connections = [c for p in tree for c in p.net_connections(kind="inet")]
    addresses = {c.laddr.ip for c in connections} | {c.raddr.ip for c in connections if c.raddr}
    assert addresses == {"127.0.0.1"}, addresses
    workers = [p for p in tree if p.cmdline()[0].startswith("VLLM::Worker_TP")]
    assert all(p.net_connections(kind="inet") for p in workers), "each rank holds connections of its own"


@TWO_CPUS
def test_memory_counts_every_process_of_the_tree_both_ranks_included(tp2: RunningServer) -> None:
    """The sampler's sum over the tree is more than the processes above the ranks hold: each rank holds its half of
    the weights (and RSS counts what both map alike)."""
    tree = _tree(tp2)
    workers = [p for p in tree if p.cmdline()[0].startswith("VLLM::Worker_TP")]
    assert len(workers) == 2
    rss, pss = tree_memory([tp2.process.pid])
    ranks = sum(p.memory_info().rss for p in workers) / 2**20
    assert pss is not None and rss > ranks > 2 * 100, (rss, pss, ranks)


@TWO_CPUS
def test_the_prefix_cache_counters_of_a_tp2_server_count_a_warm_repeat_and_the_reset_empties_it(
    tp2: RunningServer,
) -> None:
    url = tp2.endpoint.base_url
    watched = ServerProbe(url, series=PREFIX_CACHE_SERIES).watched()

    def prefix_cache_counters(page: str) -> dict[str, float]:
        """The page's prefix-cache counters as the plugin reads them (one reader for /metrics: server_metrics.py)."""
        return counter_increases([(PREFIX_CACHE_SERIES, parse_snapshot(page, watched).counters)]) or {}

    body = {"model": "qwen3-moe-tiny", "prompt": LONG_PROMPTS[1], "max_tokens": 2, "temperature": 0}
    with httpx.Client(timeout=120) as http:
        before = prefix_cache_counters(http.get(url + "/metrics").text)
        first = http.post(url + "/v1/completions", json=body).json()["usage"]
        second = http.post(url + "/v1/completions", json=body).json()["usage"]
        after = prefix_cache_counters(http.get(url + "/metrics").text)
        assert http.post(url + "/reset_prefix_cache").status_code == 200
        third = http.post(url + "/v1/completions", json=body).json()["usage"]
    assert first["prompt_tokens"] > 128 and first["prompt_tokens_details"]["cached_tokens"] == 0
    assert second["prompt_tokens_details"]["cached_tokens"] >= 128
    assert after["prefix_cache_queries"] - before["prefix_cache_queries"] == 2 * first["prompt_tokens"]
    assert after["prefix_cache_hits"] - before["prefix_cache_hits"] == second["prompt_tokens_details"]["cached_tokens"]
    assert third["prompt_tokens_details"]["cached_tokens"] == 0


@TWO_CPUS
def test_sigterm_takes_down_every_process_of_the_tree_its_shared_memory_and_gives_the_harness_its_cpus(
    tp2: RunningServer,
) -> None:
    """Run last of the fixture's tests: it stops the server (the fixture's own stop is then a no-op)."""
    tree = _tree(tp2)
    assert len(tree) >= 5, _names(tree)  # keeper, API server, EngineCore, two workers
    shared = shared_memory_files(p.pid for p in tree)
    assert any(path.name.endswith("cpushm_1") for path in shared), shared
    started = time.monotonic()
    tp2.stop()
    stopped_s = time.monotonic() - started
    assert _alive(tree) == []
    assert [path for path in shared if path.exists()] == [], (
        "vLLM leaves its ranks' all-reduce buffers; the stop does not"
    )
    assert frozenset(os.sched_getaffinity(0)) == AFFINITY.available()
    print(f"TP=2 tree of {len(tree)} processes stopped in {stopped_s:.1f} s")


FAULTS = """
import pytest
from pytest_swarm import Server

ARGS = {args!r}

# A MoE the CPU's MoE kernel refuses (hidden 240, not a multiple of 32): the item fails at its boot, before any round.
@pytest.mark.swarm(server=Server.vllm("qwen3-moe-h240", **ARGS), concurrency=1, max_tokens=8, rounds=1)
def test_unservable_moe(swarm):
    swarm.run()

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


@TWO_CPUS
def test_a_rank_killed_mid_round_fails_the_item_naming_it_and_an_unservable_moe_fails_before_any_round(
    pytester: pytest.Pytester, tagged: str, tmp_path: Path
) -> None:
    pytester.makepyfile(test_faults=FAULTS.format(args=SPEC_ARGS, cpus=CPUS))
    logs = tmp_path / "tmp"
    logs.mkdir()
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
    assert "test_faults.py::test_unservable_moe FAILED" in out
    assert "NotImplementedError: No Unquantized MoE backend supports the deployment configuration." in out, (
        "vLLM's own words, its worker's exception, above the API server's 'see root cause above'"
    )
    assert "test_faults.py::test_rank_killed FAILED" in out
    assert f"swarm gate FAIL\n  hard limit broken: server 0 (vllm:qwen3-moe-tiny x4 cpus={cpu_list(CPUS)} tp2 " in out
    assert f"the first of its processes to die: VLLM::Worker_TP1 (pid {killed})" in out, "the rank, not what followed"
    document = json.loads((pytester.path / "out.json").read_text())
    tests = {t["nodeid"].rsplit("::", 1)[-1]: t for t in document["tests"]}
    assert "test_unservable_moe" not in tests, "no round was played: there is nothing to report of it"
    figures = tests["test_rank_killed"]["figures"]
    assert tests["test_rank_killed"]["rounds"] == 20 and figures["requests"] == 80, "every round kept, failed or not"
    assert 8 <= figures["requests"] - figures["failures"] < 80 and figures["output_tokens"] >= 8 * 64, figures
    assert _alive(tree) == [] and _vllm_processes(tagged) == [] and servers_left(tagged) == []
    mapped = shared_memory_files(psutil.pids())  # another session's live vLLM keeps its own
    left = [p for p in Path("/dev/shm").glob("vllm_dist_*") if p.stat().st_mtime > started and p not in mapped]
    assert left == [], "the ranks' all-reduce buffers go with them"
