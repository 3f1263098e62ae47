"""Process-level swarms on the real embedded engine: N servers and their own memory, and the guard. (A worker's boot
failure stopping the others: the pool's, tests/engines/test_pool.py; the item failing with its words: the fake
box's, tests/test_items_on_the_box.py.)"""

from __future__ import annotations

import json

import pytest

from tests.conftest import servers_left

pytestmark = [
    pytest.mark.e2e(reason="one real server a worker: the daemons' own memory, the guard"),
    pytest.mark.functional,
]

HW = "--swarm-hardware=testbox"


def test_the_daemons_own_memory_counts_each_workers_server(pytester: pytest.Pytester, tagged: str) -> None:
    """A server a worker, and their memory as the sampler reads the daemons themselves: two map one GGUF, so their RSS
    counts it twice and PSS once. (The rows a worker and the interactive count are the fake box's:
    tests/test_items_on_the_box.py.)"""
    pytester.makepyfile(
        test_workers="""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.llamacpp(threads=1), mode="process", workers=[1, 2], max_tokens=8, rounds=1)
        def test_workers(swarm):
            result = swarm.run()
            assert result.requests == swarm.workers and result.failures == 0
        """
    )
    result = pytester.runpytest_subprocess("-q", HW, "--swarm-json=out.json")
    result.assert_outcomes(passed=2)
    w1, w2 = json.loads((pytester.path / "out.json").read_text())["tests"]
    assert w2["figures"]["workers"] == 2 and [w["worker"] for w in w2["figures"]["per_worker"]] == [0, 1]
    memory = w2["figures"]["memory"]
    assert memory["samples"] >= 1 and memory["gpu_note"].startswith("NVML not available")
    assert memory["pss_peak_mib"] < memory["rss_peak_mib"]
    assert memory["rss_peak_mib"] > 1.5 * w1["figures"]["memory"]["rss_peak_mib"]
    assert servers_left(tagged) == []


def test_the_guard_aborts_the_round_keeps_the_results_and_fails_the_item(
    pytester: pytest.Pytester, tagged: str
) -> None:
    pytester.makepyfile(
        test_guard="""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.llamacpp(), concurrency=2, max_tokens=64, rounds=3)
        def test_guard(swarm):
            swarm.run()
        """
    )
    # No machine has a petabyte free: the guard trips at its first sample.
    result = pytester.runpytest_subprocess("-q", HW, "--swarm-min-host-mem=1000000000", "--swarm-json=out.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*round aborted by the guard: host available memory * MiB fell below --swarm-min-host-mem 1000000000 MiB*"]
    )
    (test,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    # what an abort leaves (its round kept, no round after it, the cancelled requests counted): the fake box's test
    assert test["figures"]["aborted"].startswith("round aborted by the guard")
    assert servers_left(tagged) == []
