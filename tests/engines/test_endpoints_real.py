"""`Server.endpoint`: two real llama.cpp servers that the test starts itself, outside the plugin, as someone else's
deployments would be, measured against each other and left running."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from pytest_swarm.engines.models import embedded_gguf
from pytest_swarm.engines.process import ServerProcess, start_on_free_port
from pytest_swarm.engines.xllamacpp_server import COMMAND
from tests.test_doc_blocks import ROOT, project_files

pytestmark = pytest.mark.e2e(reason="two real llama.cpp servers the plugin did not start, their speeds its own")

SUITE = """
import pytest
from pytest_swarm import Server

ONE = Server.endpoint({one!r}, name="one-thread")
TWO = Server.endpoint({two!r}, name="two-threads")
ITEM = dict(concurrency=1, max_tokens=24, gate=["effective_tps"], tolerance=0.05)

@pytest.mark.swarm(server=ONE, reference=TWO, **ITEM)
def test_one_thread_against_two(swarm):
    swarm.run()

@pytest.mark.swarm(server=TWO, reference=Server.endpoint({two_v1!r}, name="two-threads-again"), **ITEM)
def test_the_same_server_on_both_urls(swarm):
    swarm.run()
"""


Deployment = tuple[ServerProcess, int]


@pytest.fixture
def deployments(tmp_path: Path) -> Iterator[tuple[Deployment, Deployment]]:
    """Two llama.cpp servers of the embedded model, one decoding on one thread and one on two, and their ports."""

    def argv(threads: int) -> Callable[[int], list[str]]:
        return lambda port: [*COMMAND, "-m", str(embedded_gguf()), "--port", str(port), "-t", str(threads)]

    one = start_on_free_port(argv(1), tmp_path / "one.log", "/health", 120)
    try:
        two = start_on_free_port(argv(2), tmp_path / "two.log", "/health", 120)
        try:
            yield one, two
        finally:
            two[0].stop()
    finally:
        one[0].stop()


def test_an_ab_of_two_running_servers_names_the_slower_stream_and_leaves_both_as_they_were(
    pytester: pytest.Pytester, deployments: tuple[Deployment, Deployment]
) -> None:
    """One thread against two: the one-thread server FAILs, each of its streams slower; the two-thread server against
    itself on its other URL passes. Both are still up afterwards, the same processes, never restarted."""
    one, two = deployments
    urls = {name: f"http://127.0.0.1:{port}" for name, (_, port) in (("one", one), ("two", two))}
    pytester.makepyfile(test_deployments=SUITE.format(**urls, two_v1=urls["two"] + "/v1"))
    result = pytester.runpytest_subprocess("-v", "--swarm-json=out.json", "--swarm-hardware=testbox")
    items = {t["nodeid"].rsplit("::", 1)[-1]: t for t in json.loads((pytester.path / "out.json").read_text())["tests"]}
    result.assert_outcomes(passed=1, failed=1)
    slower = items["test_one_thread_against_two"]
    assert slower["gate"]["verdict"] == "fail"
    assert slower["throughput_factors"][0]["factor"] == "stream_tps", slower["throughput_factors"]
    assert items["test_the_same_server_on_both_urls"]["gate"]["verdict"] == "pass"
    result.stdout.fnmatch_lines(["*one-thread, two-threads: running already, never started, stopped or restarted*"])
    for process, port in (one, two):
        assert process.poll() is None, "a server the plugin did not start was stopped"
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5.0).status_code == 200


def test_the_readmes_endpoint_test_runs_as_written_against_a_running_server(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """The README's third first test, its URL made this server's as a reader would: three levels measured, no
    baseline yet (said, and passed), the JSON filed under the endpoint's name, the server up afterwards."""
    process, port = start_on_free_port(
        lambda port: [*COMMAND, "-m", str(embedded_gguf()), "--port", str(port), "-np", "4"],
        tmp_path / "prod.log",
        "/health",
        120,
    )
    try:
        code = project_files(ROOT / "README.md")["tests/swarm/test_endpoint.py"]
        written = code.replace("http://127.0.0.1:8000/v1", f"http://127.0.0.1:{port}/v1")
        assert written != code, "the README's endpoint test names no URL to make this server's"
        pytester.makepyfile(test_endpoint=written)
        result = pytester.runpytest_subprocess("--swarm-json=out.json", "--swarm-hardware=testbox")
        result.assert_outcomes(passed=3)
        result.stdout.fnmatch_lines(
            [
                "*test_prod_keeps_its_throughput[[]c4[]]*prod*4*0/*no baseline",
                "3 of 3 items have no baseline for hardware 'testbox': record them with *--swarm-update-baselines*",
            ]
        )
        document = json.loads((pytester.path / "out.json").read_text())
        assert sorted(t["concurrency"] for t in document["tests"]) == [1, 2, 4]
        assert all(t["figures"]["failures"] == 0 and t["figures"]["requests"] > 0 for t in document["tests"])
        assert process.poll() is None and httpx.get(f"http://127.0.0.1:{port}/health", timeout=5.0).status_code == 200
    finally:
        process.stop()
