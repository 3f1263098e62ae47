"""The vLLM path against one real vLLM shared by in-process checks (its boot is the expensive part): pinning,
loopback, the prefix cache and its counters, its own clock of each request, /tokenize, /version and the sleep
endpoints. The environment and the spec are tests/engines/test_vllm_real.py's.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from typing import Any, cast

import httpx
import psutil
import pytest

from pytest_swarm import Server
from pytest_swarm._util.affinity import AFFINITY, cpu_list
from pytest_swarm.client.tokenize import count_tokens
from pytest_swarm.engines.process import RunningServer
from pytest_swarm.engines.registry import booted_anywhere, launch
from pytest_swarm.engines.vllm_served import PREFIX_CACHE_SERIES
from pytest_swarm.engines.vllm_sleep import VllmSleeper
from pytest_swarm.figures.components import split_round
from pytest_swarm.load.rounds import run_load
from pytest_swarm.settings import LaunchSettings
from pytest_swarm.specs import Load, Workload
from pytest_swarm.telemetry.counters import ServerProbe, counter_increases
from pytest_swarm.telemetry.server_metrics import parse_snapshot
from tests.conftest import server_cpus
from tests.engines.test_vllm_real import CPU_ENV, LONG_PROMPTS, SPEC_ARGS, _names, _tree_up, vllm_executable
from tests.factories import TakePlanner

pytestmark = [
    pytest.mark.e2e(reason="vLLM itself: its cache, clock, sleep, loopback and pinning"),
    pytest.mark.functional,
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """One real vLLM for the in-process checks below (booting is the expensive part): pinned to the server's CPUs with
    its compute threads bound to them, booted on every CPU as the A/B search boots such sides (engine.py), where this
    machine has a CPU to spare."""
    settings = LaunchSettings(log_dir=tmp_path_factory.mktemp("vllm-logs"), boot_timeout_s=300, vllm=vllm_executable())
    cpus = server_cpus()
    bound = {**CPU_ENV, "VLLM_CPU_OMP_THREADS_BIND": cpu_list(cpus)} if cpus else CPU_ENV
    spec = Server.vllm("gemma3-270m", max_num_seqs=4, **{**SPEC_ARGS, "env": bound}, device="cpu", cpus=cpus)
    started = time.monotonic()
    server = launch(booted_anywhere(spec) or spec, settings)
    cast(dict[str, Any], server.info)["boot_s"] = time.monotonic() - started  # not a ServerInfo key
    try:
        yield server
    finally:
        server.stop()
    assert frozenset(os.sched_getaffinity(0)) == AFFINITY.available(), "the stop gave the harness its CPUs back"


def test_a_vllm_booted_on_every_cpu_is_pinned_once_ready_its_compute_threads_bound_where_a_pinned_boot_binds_them(
    served: RunningServer,
) -> None:
    """After its boot on every CPU, every thread of every vLLM process is on the spec's CPUs, and the EngineCore bound
    its OpenMP threads to them as it would have booted pinned ("auto" under a one-CPU mask picks that CPU; unpinned it
    picks CPU 0 and keeps CPU 1 for the API server)."""
    cpus = list(served.process.cpus)  # server_cpus() would read the harness's mask, narrowed while this server runs
    if len(AFFINITY.available()) < 2:
        pytest.skip("one CPU: nothing to pin apart")
    root = psutil.Process(served.process.pid)
    tree = [root, *root.children(recursive=True)]
    assert _tree_up(tree), _names(tree)
    masks = {frozenset(os.sched_getaffinity(t.id)) for p in tree for t in p.threads()}
    assert masks == {frozenset(cpus)}, masks
    log = served.process.log_path.read_text()
    assert f"VLLM_CPU_OMP_THREADS_BIND='{cpu_list(cpus)}'" in log and f"core ids={cpus}" in log


def test_every_vllm_process_talks_on_loopback_only(served: RunningServer) -> None:
    """Every vLLM process (API server, EngineCore, workers) binds and connects on 127.0.0.1 only: VLLM_HOST_IP is pinned."""
    tree = [psutil.Process(served.process.pid), *psutil.Process(served.process.pid).children(recursive=True)]
    assert len(tree) >= 3, [p.name() for p in tree]
    addresses = {c.laddr.ip for p in tree for c in p.net_connections(kind="inet")} | {
        c.raddr.ip for p in tree for c in p.net_connections(kind="inet") if c.raddr
    }
    assert addresses and addresses <= {"127.0.0.1"}, addresses


def test_a_repeated_long_prompt_hits_the_cache_its_counters_count_it_and_the_reset_empties_it(
    served: RunningServer,
) -> None:
    """The warm repeat the cold proof is measured against: without it a proof of zero hits could not fail. The
    /metrics counters, read as the plugin reads them, count what the answers' usage says."""
    url = served.endpoint.base_url
    watched = ServerProbe(url, series=PREFIX_CACHE_SERIES).watched()

    def prefix_cache_counters(page: str) -> dict[str, float]:
        return counter_increases([(PREFIX_CACHE_SERIES, parse_snapshot(page, watched).counters)]) or {}

    body = {"model": "gemma3-270m", "prompt": LONG_PROMPTS[0], "max_tokens": 1, "temperature": 0}
    with httpx.Client(timeout=60) as http:
        before = prefix_cache_counters(http.get(url + "/metrics").text)
        first = http.post(url + "/v1/completions", json=body).json()["usage"]
        second = http.post(url + "/v1/completions", json=body).json()["usage"]
        after = prefix_cache_counters(http.get(url + "/metrics").text)
        assert first["prompt_tokens"] > 128
        assert first["prompt_tokens_details"]["cached_tokens"] == 0
        assert second["prompt_tokens_details"]["cached_tokens"] >= 128
        assert second["prompt_tokens_details"]["cached_tokens"] % 128 == 0, "only full 128-token blocks are cached"
        assert http.post(url + "/reset_prefix_cache").status_code == 200
        third = http.post(url + "/v1/completions", json=body).json()["usage"]
    assert third["prompt_tokens_details"]["cached_tokens"] == 0
    assert after["prefix_cache_queries"] - before["prefix_cache_queries"] == 2 * first["prompt_tokens"]
    assert after["prefix_cache_hits"] - before["prefix_cache_hits"] == second["prompt_tokens_details"]["cached_tokens"]


def test_vllms_own_clock_splits_every_request_and_a_queue_shows_where_four_agents_share_its_four_seqs(
    served: RunningServer,
) -> None:
    """VLLM's per-request metrics (--enable-per-request-metrics, asked for where this vLLM has it) reach each record
    as a server clock of queue, prefill and decode that fits in what the client saw: the split the where-the-time-went
    line reads, with nothing left unaccounted. Eight agents on four seqs: the later four wait, by vLLM's own clock.
    How the split turns into an A/B's named cause is checked on the stand-in (tests/engines/test_vllm.py) and the fake
    box; this is what only the real engine shows."""
    assert served.info["server_clock"] == "per request (--enable-per-request-metrics)"
    load = Load(concurrency=8, rounds=1, warmup=False)
    rounds, _ = run_load(
        [served.endpoint],
        Workload(max_tokens=8),
        load,
        TakePlanner(lambda n: [f"Reverse list {i} in Python." for i in range(n)], load),
    )
    (round_,) = rounds
    assert all(r.ok and r.server_clock is not None for r in round_.requests), [r.error for r in round_.requests]
    split = split_round(round_.requests)
    assert split.source == "per request" and split.requests == 8 and split.contradictions == 0, split
    assert {name for name, _ in split.means} == {"queue", "prefill", "decode", "client"}, split.means
    queued = sorted(r.server_clock.queue_s or 0.0 for r in round_.requests if r.server_clock is not None)
    assert queued[-1] > queued[0], f"eight agents on four seqs: some waited in vLLM's queue, by its clock: {queued}"


def test_vllms_tokenize_route_counts_as_the_plugin_asks(served: RunningServer) -> None:
    """The vLLM dialect of POST /tokenize, against vLLM itself: no special tokens, a token a repeated word."""
    assert count_tokens(served.endpoint, "vllm", ["the the the", "the"]) == {"the the the": 3, "the": 1}
    assert served.info["tokenizer"] == "vllm"


def test_the_version_and_readiness_are_vllms_own(served: RunningServer) -> None:
    version = httpx.get(served.endpoint.base_url + "/version").json()["version"]
    assert served.info["engine_version"] == f"vllm {version}"
    assert httpx.get(served.endpoint.base_url + "/v1/models").json()["data"][0]["id"] == "gemma3-270m"
    print(f"vLLM {version} ready in {cast(dict[str, Any], served.info)['boot_s']:.1f} s")


def test_vllms_own_sleep_endpoints_answer_as_the_stand_in_does_and_hold_a_request_until_the_wake(
    served: RunningServer,
) -> None:
    """The stand-in's sleep protocol, against vLLM itself. The CPU build keeps its memory asleep ("sleep mode is not
    supported on CPU, ignore it", v1/worker/cpu_worker.py), but its scheduler pauses as on a GPU, and what a request
    meets then is the scheduler's: it is queued, not refused."""
    url = served.endpoint.base_url
    sleeper = VllmSleeper(Server.vllm("gemma3-270m", max_num_seqs=4, **SPEC_ARGS), served)
    body = {"model": "gemma3-270m", "prompt": "Reverse a list in Python.", "max_tokens": 4, "temperature": 0}
    refused = httpx.post(url + "/sleep?level=3", timeout=60)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "query.level"
    sleeper.sleep()
    assert httpx.get(url + "/is_sleeping").json() == {"is_sleeping": True}
    answered: list[dict[str, Any]] = []
    sent = threading.Thread(
        target=lambda: answered.append(httpx.post(url + "/v1/completions", json=body, timeout=120).json())
    )
    sent.start()
    sent.join(timeout=2)
    assert sent.is_alive(), "held while asleep"
    assert httpx.post(url + "/wake_up", timeout=120).json() == {"status": "awake", "tags": None}
    sleeper.wake()  # already awake: confirmed at once
    sent.join(timeout=120)
    assert answered[0]["usage"]["completion_tokens"] == 4
