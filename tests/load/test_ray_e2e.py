"""--swarm-ray on a real two-node Ray cluster on loopback, with the real embedded engine.

The plugin runs in a pytest subprocess, as a user's run would, and joins the cluster
this module started (tests/load/ray_cluster.py) as its driver.
"""

from __future__ import annotations

import importlib.util
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import psutil
import pytest

from pytest_swarm.client import Endpoint
from pytest_swarm.figures.summary import summarize
from pytest_swarm.load.agents import RoundPlayer
from pytest_swarm.load.ray.clock import MAX_BOUND_S
from pytest_swarm.load.rounds import run_load
from pytest_swarm.settings import LaunchSettings, LockSettings
from pytest_swarm.specs import Load, Workload
from tests.factories import TakePlanner
from tests.load.ray_cluster import TwoNodes, leftovers, outward_sockets, tagged, two_nodes
from tests.standins import openai_standin

pytestmark = [
    pytest.mark.e2e(reason="a real Ray cluster of two nodes placing real llama.cpp servers and generators"),
    # Not importorskip: Ray must not be imported before the cluster fixture holds it to loopback (ray_cluster.py).
    pytest.mark.skipif(
        importlib.util.find_spec("ray") is None,
        reason="the Ray tests need the ray extra: pip install 'pytest-llm-swarm[ray]'",
    ),
]

HW = "--swarm-hardware=testbox"
LAX = {"ttft.p95": "< 60", "per_request_tps.median": "> 0.1"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[TwoNodes]:
    with two_nodes(uuid.uuid4().hex) as nodes:
        yield nodes


def test_process_swarm_across_two_nodes(pytester: pytest.Pytester, cluster: TwoNodes) -> None:
    pytester.makepyfile(
        test_spread=f"""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.llamacpp(threads=1), mode="process", workers=2, prompts_per_agent=2,
                           max_tokens=8, rounds=1, interactive={LAX!r})
        def test_spread(swarm):
            result = swarm.run()
            assert result.requests == 4 and result.failures == 0
        """
    )
    result = pytester.runpytest_subprocess("-q", HW, f"--swarm-ray={cluster.address}", "--swarm-json=out.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "  worker 0 on node-*: 2/2 ok, tok/s median * min *, TTFT p95 * s",
            "  worker 1 on node-*: 2/2 ok, tok/s median * min *, TTFT p95 * s",
            "test_spread: Ray node node-a (127.0.0.1): workers *, reads this host's clock (measured * ms), RSS/PSS peak */* MiB",
            "test_spread: Ray node node-b (127.0.0.1): workers *, reads this host's clock (measured * ms), RSS/PSS peak */* MiB",
        ]
    )
    figures = json.loads((pytester.path / "out.json").read_text())["tests"][0]["figures"]
    nodes = {n["node"]: n for n in figures["nodes"]}
    assert sorted(nodes) == ["node-a", "node-b"]  # SPREAD: one server on each node
    assert sorted(w for n in nodes.values() for w in n["workers"]) == [0, 1]
    assert {w["node"] for w in figures["per_worker"]} == {"node-a", "node-b"}
    for node in nodes.values():
        assert node["shared_clock"] and abs(node["clock_offset_s"]) < 0.02
        assert 100 < node["pss_peak_mib"] <= node["rss_peak_mib"]  # one llama.cpp daemon's tree, sampled on its node
    assert figures["memory"]["rss_peak_mib"] == pytest.approx(sum(n["rss_peak_mib"] for n in nodes.values()))
    assert figures["memory"]["gpu_note"].startswith("NVML not available") and all(n["gpu_note"] for n in nodes.values())
    assert leftovers(cluster.tag) == []


def test_request_swarm_with_generators_on_both_nodes(pytester: pytest.Pytester, cluster: TwoNodes) -> None:
    pytester.makepyfile(
        test_generators="""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.llamacpp(slots=2), concurrency=2, generators=2, prompts_per_agent=2, max_tokens=8, rounds=1)
        def test_generators(swarm):
            result = swarm.run()
            assert result.requests == 4 and result.failures == 0 and result.facets.server.peak_streams == 2
        """
    )
    result = pytester.runpytest_subprocess("-q", HW, f"--swarm-ray={cluster.address}", "--swarm-json=out.json")
    result.assert_outcomes(passed=1)
    figures = json.loads((pytester.path / "out.json").read_text())["tests"][0]["figures"]
    assert sorted(n["node"] for n in figures["nodes"]) == ["node-a", "node-b"]
    assert all(n["workers"] == [] and n["shared_clock"] for n in figures["nodes"])
    assert leftovers(cluster.tag) == []


def test_a_capacity_search_over_workers_places_each_level_on_the_cluster(
    pytester: pytest.Pytester, cluster: TwoNodes
) -> None:
    """Where the item's boots would go, its search's levels go: one daemon on a node, then one on each, each level's
    memory sampled on its nodes; the item's rows per node are its capacity level's."""
    pytester.makepyfile(
        test_cluster_capacity=f"""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.llamacpp(threads=1), mode="process", capacity={{"workers": (1, 2)}},
                           concurrency=1, max_tokens=8, interactive={LAX!r})
        def test_cluster_capacity(swarm):
            swarm.run()
        """
    )
    result = pytester.runpytest_subprocess("-q", HW, f"--swarm-ray={cluster.address}", "--swarm-json=out.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["test_cluster_capacity: capacity 2 workers (at least: the range ends at 2), where *"])
    (test,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    steps = test["capacity"]["steps"]
    assert [(s["level"], s["verdict"], s["failures"]) for s in steps] == [(1, "pass", 0), (2, "pass", 0)]
    assert steps[1]["rss_peak_mib"] > 1.5 * steps[0]["rss_peak_mib"], "two daemons' memory, sampled on their nodes"
    nodes = {n["node"]: n for n in test["figures"]["nodes"]}
    assert sorted(nodes) == ["node-a", "node-b"], "the capacity level's two servers, one on each node (SPREAD)"
    assert sorted(w for n in nodes.values() for w in n["workers"]) == [0, 1]
    assert {w["node"] for w in test["figures"]["per_worker"]} == {"node-a", "node-b"}
    assert leftovers(cluster.tag) == []


def test_resources_no_node_has_fail_the_item_naming_them(pytester: pytest.Pytester, cluster: TwoNodes) -> None:
    pytester.makepyfile(
        test_rtx="""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.llamacpp(), mode="process", workers=2, ray_resources={"gpu_rtx3090": 1}, max_tokens=4)
        def test_rtx(swarm):
            swarm.run()
        """
    )
    result = pytester.runpytest_subprocess("-q", HW, f"--swarm-ray={cluster.address}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*no Ray node has 1 gpu_rtx3090 for one actor (CPU 1, gpu_rtx3090 1); the nodes offer: node-a (127.0.0.1): CPU 1, zone_a 1; node-b (127.0.0.1): CPU 1, zone_b 1*"
        ]
    )
    assert leftovers(cluster.tag) == []


def _server_port_under(raylet_pid: int, tag: str) -> int | None:
    """The port of the llama.cpp server that a worker of this raylet started, once there is one."""
    for process in tagged(tag):
        try:
            command = process.cmdline()
            if any(part.endswith("xllamacpp_server.py") for part in command) and raylet_pid in [
                p.pid for p in process.parents()
            ]:
                return int(command[command.index("--port") + 1])
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return None


def _busy(port: int) -> bool:
    """Whether the server has answered a request and is decoding another (llama.cpp's /metrics)."""
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2.0).text
    except httpx.HTTPError:
        return False
    values = {line.split()[0]: float(line.split()[1]) for line in text.splitlines() if line.startswith("llamacpp:")}
    return values.get("llamacpp:requests_processing", 0) > 0 and values.get("llamacpp:n_decode_total", 0) > 48


def test_a_node_dying_mid_round_fails_the_item_naming_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_dying=f"""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.llamacpp(threads=1), mode="process", workers=2, prompts_per_agent=6, max_tokens=48,
                           rounds=1, warmup=False, interactive={LAX!r})
        def test_dying(swarm):
            swarm.run()
        """
    )
    with two_nodes(uuid.uuid4().hex) as nodes:
        outcome: list[pytest.RunResult] = []
        run = threading.Thread(
            target=lambda: outcome.append(
                pytester.runpytest_subprocess("-q", HW, f"--swarm-ray={nodes.address}", "--swarm-json=out.json")
            )
        )
        run.start()
        deadline = time.monotonic() + 120
        port = None
        while time.monotonic() < deadline and run.is_alive():
            port = port or _server_port_under(nodes.raylet_pid(nodes.second), nodes.tag)
            if port is not None and _busy(port):
                break
            time.sleep(0.2)
        assert port is not None and run.is_alive(), "node-b's server never got busy"
        nodes.cluster.remove_node(nodes.second)
        run.join(300)
        assert not run.is_alive()
        result = outcome[0]
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(
            ["*load generator * of 2 on Ray node node-b: its Ray node died or became unreachable*"]
        )
        figures = json.loads((pytester.path / "out.json").read_text())["tests"][0]["figures"]
        rows = {w["node"]: w for w in figures["per_worker"]}
        assert (
            rows["node-b"]["failures"] == rows["node-b"]["requests"] == 6
        )  # its generator's report was lost: all 6 count as failed
        assert all("on Ray node node-b: its Ray node died" in cause for cause in rows["node-b"]["failure_causes"])
        assert rows["node-a"]["requests"] >= 1  # the survivor's round was ended with it, its requests kept
        assert "Ray node node-b" in figures["aborted"]
        assert leftovers(nodes.tag) == []


def test_every_ray_process_and_the_driver_listen_on_loopback_only(
    cluster: TwoNodes, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ray

    from pytest_swarm.load.ray.cluster import LOOPBACK_SWITCH, join

    monkeypatch.setenv(
        LOOPBACK_SWITCH, "0"
    )  # join sets it: put back afterwards, so later runs find their own way to it
    joined = join(cluster.address)
    try:
        assert joined.loopback and [n.name for n in joined.nodes] == ["node-a", "node-b"]
        assert {n.address for n in joined.nodes} == {"127.0.0.1"} and ray.util.get_node_ip_address() == "127.0.0.1"  # type: ignore[no-untyped-call]

        @ray.remote(num_cpus=0)
        def where() -> str:
            return str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]

        assert (
            ray.get([where.options(resources={zone: 0.01}).remote() for zone in ("zone_a", "zone_b")])
            == ["127.0.0.1"] * 2
        )
        processes = [psutil.Process(), *tagged(cluster.tag)]
        assert len(processes) > 6  # GCS, two raylets, their agents and workers, and this driver
        assert outward_sockets(processes) == []
    finally:
        ray.shutdown()


def test_ray_rewrites_loopback_unless_held_to_it() -> None:
    """Why cluster.py sets RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0: without it Ray swaps 127.0.0.1 for the outward address."""
    import os
    import subprocess
    import sys

    from pytest_swarm.load.ray.cluster import LOOPBACK_SWITCH, is_loopback

    probe = "import ray._private.services as s; print(s.resolve_ip_for_localhost('127.0.0.1'))"
    env = {k: v for k, v in os.environ.items() if k != LOOPBACK_SWITCH}
    rewritten = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    held = subprocess.run(
        [sys.executable, "-c", probe], env={**env, LOOPBACK_SWITCH: "0"}, capture_output=True, text=True, check=True
    )
    assert held.stdout.strip() == "127.0.0.1"
    outward = [
        a.address
        for addrs in psutil.net_if_addrs().values()
        for a in addrs
        if a.family == 2 and not is_loopback(a.address)
    ]
    assert rewritten in outward if outward else is_loopback(rewritten)


def test_nodes_taken_for_other_hosts_get_a_bounded_offset_and_their_records_moved_by_it(
    cluster: TwoNodes, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The path a cluster of real hosts takes, on real nodes: each offset estimated from round trips, records moved by it.

    Both nodes run on this host, so the true offset is 0: every estimate must hold it within its bound.
    """
    import ray

    from pytest_swarm.load.ray.backend import node_actor_class
    from pytest_swarm.load.ray.bridge import RayGenerators
    from pytest_swarm.load.ray.cluster import LOOPBACK_SWITCH, join

    monkeypatch.setenv(LOOPBACK_SWITCH, "0")
    join(cluster.address)
    actors = [
        node_actor_class().options(num_cpus=0, resources={zone: 0.01}).remote(LaunchSettings(tmp_path), LockSettings())
        for zone in ("zone_a", "zone_b")
    ]
    try:
        with openai_standin.serve() as url:
            endpoint, load, made = Endpoint(url, "standin"), Load(concurrency=4, rounds=2, generators=2), []
            workload = Workload(max_tokens=openai_standin.TOKENS)

            @asynccontextmanager
            async def players() -> AsyncIterator[RoundPlayer]:
                generators = RayGenerators(
                    [endpoint], workload, load, list(zip(actors, ["node-a", "node-b"], strict=True))
                )
                made.append(generators)
                async with generators.shared_clocks([False, False]):  # as if each node were another host
                    yield generators

            prompts = iter(range(10**6))
            planner = TakePlanner(lambda n: [f"prompt {next(prompts)}" for _ in range(n)], load)
            rounds, _ = run_load([endpoint], workload, load, planner, players=players)
        clocks = made[0].clocks
        assert sorted(clocks) == ["node-a", "node-b"]
        for clock in clocks.values():
            assert not clock.shared and 0 < clock.bound_s <= MAX_BOUND_S and abs(clock.offset_s) <= clock.bound_s
        records = [r for round_ in rounds for r in round_.requests]
        assert len(records) == 8 and all(r.ok for r in records)
        assert {r.node for r in records} == {"node-a", "node-b"}  # agent i from generator i mod 2
        assert all(r.node == ("node-a" if r.agent % 2 == 0 else "node-b") for r in records)
        assert (
            summarize(rounds).facets.server.peak_streams == 4
        )  # the four agents' streams overlap on the driver's time line
    finally:
        for actor in actors:
            ray.kill(actor)
        ray.shutdown()
