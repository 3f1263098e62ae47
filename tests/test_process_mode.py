"""Process-level swarms on the real embedded engine: N servers, per-worker rows, memory, the guard."""

from __future__ import annotations

import json

import pytest

from tests.conftest import servers_left

pytestmark = pytest.mark.e2e(reason="one real server a worker: the daemons' own memory, a boot failure, the guard")

HW = "--swarm-hardware=testbox"


def test_workers_each_get_their_own_server_and_rows(pytester: pytest.Pytester, tagged: str) -> None:
    pytester.makepyfile(
        test_workers="""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.llamacpp(threads=1), mode="process", workers=[1, 2], prompts_per_agent=2,
                           max_tokens=8, rounds=1, interactive={"ttft.p95": "< 30", "per_request_tps.median": "> 1"})
        def test_workers(swarm):
            result = swarm.run()
            assert result.requests == 2 * swarm.workers and result.failures == 0
        """
    )
    result = pytester.runpytest_subprocess("-q", HW, "--swarm-json=out.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "test_workers[[]w2[]]: 2 workers, interactive=True (ttft.p95 < 30, per_request_tps.median > 1)",
            "  worker 0: 2/2 ok, tok/s median * min *, TTFT p95 * s",
            "  worker 1: 2/2 ok, tok/s median * min *, TTFT p95 * s",
            "test_workers.py::test_workers: max_interactive_workers = 2",
        ]
    )
    w1, w2 = json.loads((pytester.path / "out.json").read_text())["tests"]
    assert w2["max_interactive_workers"] == 2
    figures = w2["figures"]
    assert figures["workers"] == 2 and [w["worker"] for w in figures["per_worker"]] == [0, 1]
    memory = figures["memory"]
    assert memory["samples"] >= 1 and memory["gpu_note"].startswith("NVML not available")
    # Two daemons map one GGUF: their RSS counts it twice, PSS once.
    assert memory["pss_peak_mib"] < memory["rss_peak_mib"]
    assert memory["rss_peak_mib"] > 1.5 * w1["figures"]["memory"]["rss_peak_mib"]
    assert servers_left(tagged) == []


def test_one_worker_failing_to_boot_stops_the_others(pytester: pytest.Pytester, tagged: str) -> None:
    pytester.makepyfile(
        test_boot="""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.llamacpp(extra_args=["--bogus"]), mode="process", workers=3, max_tokens=4)
        def test_boot(swarm):
            swarm.run()
        """
    )
    result = pytester.runpytest_subprocess("-q", HW)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*server died before it was ready (exit status 2)*",
            "*(3 of 3 servers failed to boot; the others were stopped)*",
        ]
    )
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
    figures = test["figures"]
    assert len(figures["rounds"]) == 1, "no round after the aborted one"
    assert figures["requests"] >= 1 and figures["failures"] >= 1
    assert any(cause.startswith("cancelled: the round was aborted") for cause in figures["failure_causes"])
    assert figures["aborted"].startswith("round aborted by the guard")
    assert servers_left(tagged) == []
