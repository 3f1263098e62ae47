"""What an item asks of a Ray cluster, checked before anything is placed; the pure parts of the Ray backend."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm.core.errors import ClusterError
from pytest_swarm.engines.llamacpp import spec as llamacpp
from pytest_swarm.engines.process import free_port
from pytest_swarm.engines.vllm import spec as vllm
from pytest_swarm.figures.workers import NodeFigures, nodes_over_boots
from pytest_swarm.load.ray.cluster import LOOPBACK_SWITCH, is_loopback, join, resolve
from pytest_swarm.load.ray.memory import NodeMemoryFigures, combine
from pytest_swarm.load.ray.placement import NodeInfo, actor_options, bundle, node_names, unplaceable
from pytest_swarm.marker.parse import parse_marker
from pytest_swarm.settings import read_settings
from pytest_swarm.specs import SpecError
from pytest_swarm.telemetry.memory import MemoryFigures

A = NodeInfo(
    "a" * 56, "node-a", "127.0.0.1", {"CPU": 2.0, "GPU": 1.0, "gpu_rtx3090": 1.0, "memory": 1e9, "node:127.0.0.1": 1.0}
)
B = NodeInfo("b" * 56, "node-b", "127.0.0.1", {"CPU": 1.0, "zone_b": 1.0})


def test_a_specs_gpus_become_ray_gpus_and_the_marker_adds_custom_resources() -> None:
    assert bundle(llamacpp(), ()) == {"CPU": 1.0}
    assert bundle(vllm("m", tensor_parallel=2), (("gpu_rtx3090", 1.0),)) == {"CPU": 1.0, "GPU": 2.0, "gpu_rtx3090": 1.0}
    assert bundle(None, (("CPU", 2.0),)) == {"CPU": 2.0}  # a load generator: no server, no GPU
    assert actor_options({"CPU": 1.0, "GPU": 2.0, "gpu_rtx3090": 1.0}) == {
        "num_cpus": 1.0,
        "num_gpus": 2.0,
        "resources": {"gpu_rtx3090": 1.0},
    }


def test_what_no_node_can_ever_hold_is_refused_naming_the_resource_and_the_offer() -> None:
    assert unplaceable({"CPU": 1.0}, 3, [A, B]) is None
    assert unplaceable({"CPU": 1.0, "GPU": 1.0, "gpu_rtx3090": 1.0}, 1, [A, B]) is None
    assert unplaceable({"CPU": 1.0, "gpu_h100": 1.0}, 1, [A, B]) == (
        "no Ray node has 1 gpu_h100 for one actor (CPU 1, gpu_h100 1); the nodes offer: "
        "node-a (127.0.0.1): CPU 2, GPU 1, gpu_rtx3090 1; node-b (127.0.0.1): CPU 1, zone_b 1"
    )
    assert unplaceable({"CPU": 1.0, "GPU": 1.0}, 2, [A, B]) == (
        "2 actors of CPU 1, GPU 1 need 2 GPU, and the cluster's nodes hold room for 1 of them; the nodes offer: "
        "node-a (127.0.0.1): CPU 2, GPU 1, gpu_rtx3090 1; node-b (127.0.0.1): CPU 1, zone_b 1"
    )
    assert unplaceable({"CPU": 4.0}, 1, [A, B]) is not None and "no live node" in str(unplaceable({"CPU": 1.0}, 1, []))


@given(st.lists(st.sampled_from(["node-a", "node-b", "127.0.0.1"]), min_size=1, max_size=6))
def test_node_names_are_unique_and_short_where_they_can_be(names: list[str]) -> None:
    nodes = [(f"{i:02d}" + "f" * 54, name, "127.0.0.1") for i, name in enumerate(names)]
    given_names = node_names(nodes)
    assert len(set(given_names.values())) == len(nodes)
    for node_id, name, _ in nodes:
        assert (
            given_names[node_id] == name if names.count(name) == 1 else given_names[node_id] == f"{name}#{node_id[:6]}"
        )


def test_the_marker_takes_ray_resources_and_refuses_what_the_spec_decides() -> None:
    config = parse_marker((), {"mode": "process", "workers": 2, "ray_resources": {"gpu_rtx3090": 1, "CPU": 2}})
    assert config.ray_resources == (("CPU", 2.0), ("gpu_rtx3090", 1.0))
    for wrong in ({"GPU": 1}, {"gpu": 0}, {"": 1}, {"x": True}, ["gpu_rtx3090"]):
        with pytest.raises(
            SpecError, match=r"argument ray_resources=.*expected a dict of Ray resource name -> positive amount"
        ):
            parse_marker((), {"ray_resources": wrong})


def test_loopback_is_recognised_in_every_spelling() -> None:
    assert all(map(is_loopback, ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "::ffff:127.0.0.1", "localhost"]))
    assert not any(map(is_loopback, ["192.0.2.2", "0.0.0.0", "::", "::ffff:10.0.0.1", "ray-head"]))


def test_auto_resolves_to_the_running_cluster_before_ray_is_imported(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert resolve("10.0.0.5:6379") == "10.0.0.5:6379"
    with pytest.raises(ClusterError, match="--swarm-ray=auto: no running Ray cluster found"):
        resolve("auto")
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text("127.0.0.1:6380\n")
    assert resolve("auto") == "127.0.0.1:6380"
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:7000")
    assert resolve("auto") == "127.0.0.1:7000"


def test_an_address_where_no_cluster_answers_fails_at_once_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LOOPBACK_SWITCH, raising=False)  # join sets it for a loopback address: put back afterwards
    port = free_port()
    with pytest.raises(
        ClusterError,
        match=rf"--swarm-ray=127.0.0.1:{port}: no Ray cluster answers at 127.0.0.1:{port} \(ConnectionRefusedError",
    ):
        join(f"127.0.0.1:{port}")


@pytest.mark.parametrize(
    ("args", "ini", "expected"),
    [((), None, None), ((), "auto", "auto"), (("--swarm-ray=127.0.0.1:6380",), "auto", "127.0.0.1:6380")],
)
def test_the_option_and_its_ini_name_the_cluster(
    pytester: pytest.Pytester, args: tuple[str, ...], ini: str | None, expected: str | None
) -> None:
    if ini is not None:
        pytester.makeini(f"[pytest]\nswarm_ray = {ini}\n")
    assert read_settings(pytester.parseconfig(*args)).ray == expected


def test_memory_adds_up_over_nodes_and_counts_gpus_once_per_host() -> None:
    def figures(rss: float, pss: float | None, gpu: float | None) -> MemoryFigures:
        return MemoryFigures(
            rss_peak_mib=rss, rss_mean_mib=rss / 2, pss_peak_mib=pss, pss_mean_mib=pss, gpu_mem_peak_mib=gpu, samples=3
        )

    total = combine(
        [
            NodeMemoryFigures("node-a", "host-1", figures(400, 300, 1000)),
            NodeMemoryFigures("node-b", "host-1", figures(380, 250, 1000)),  # the same host's GPUs, seen twice
            NodeMemoryFigures("node-c", "host-2", figures(100, None, 500)),
        ]
    )
    assert (total.rss_peak_mib, total.rss_mean_mib, total.pss_peak_mib) == (880, 440, 550)
    assert (total.gpu_mem_peak_mib, total.samples) == (1500, 9)
    assert combine([]).rss_peak_mib is None


def test_neither_the_plugin_nor_the_session_nor_these_modules_import_ray() -> None:
    """The local path costs nothing more without the extra: Ray loads only once --swarm-ray asks for it."""
    modules = "pytest_swarm.plugin, pytest_swarm.run.measuring, pytest_swarm.load.ray.clock, pytest_swarm.load.ray.placement, "
    modules += "pytest_swarm.load.ray.cluster, pytest_swarm.load.ray.memory"
    probe = f"import sys, {modules}; print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))"
    assert (
        subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip() == "[]"
    )


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs the ray extra")
def test_a_ray_imported_before_the_loopback_switch_fails_the_run_rather_than_leave_loopback() -> None:
    probe = "import ray; from pytest_swarm.load.ray.cluster import join; join('127.0.0.1:6379')"
    env = {k: v for k, v in os.environ.items() if k != LOOPBACK_SWITCH}
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    assert run.returncode != 0
    assert (
        "ClusterError: --swarm-ray=127.0.0.1:6379: Ray was imported before pytest-swarm could keep it on loopback; "
        "set RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 in the environment of this run"
    ) in run.stderr


def test_node_rows_over_boots_keep_the_worst_bound_and_the_highest_peaks() -> None:
    first = (
        NodeFigures("node-b", "127.0.0.1", (1,), 0.001, 0.002, False, 300.0, 200.0),
        NodeFigures("node-a", "127.0.0.1", (0,), 0.0, 0.0, True, 400.0, None),
    )
    second = (NodeFigures("node-b", "127.0.0.1", (0,), 0.003, 0.001, False, 350.0, 150.0),)
    merged = nodes_over_boots([first, second])
    assert [n.node for n in merged] == ["node-a", "node-b"]
    assert merged[1] == NodeFigures("node-b", "127.0.0.1", (0,), 0.003, 0.002, False, 350.0, 200.0)
