"""The Ollama launcher and client end to end against the Ollama STAND-IN (tests/standins/ollama).

The stand-in speaks Ollama's CLI, environment and HTTP API, and every token comes
from the real embedded llama.cpp engine with `--parallel` = OLLAMA_NUM_PARALLEL,
so concurrency here is real. Not verified against a real Ollama binary: none can
be installed on these machines.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from pytest_swarm import Server
from pytest_swarm.core.errors import BootError
from pytest_swarm.engines.registry import launch, sleep_mode_for
from pytest_swarm.settings import LaunchSettings
from tests.conftest import servers_left
from tests.standins import STANDINS, put_first_on_path

pytestmark = [
    pytest.mark.e2e(reason="the Ollama stand-in's every token comes from the real embedded llama.cpp"),
    pytest.mark.functional,
]

HW = "--swarm-hardware=testbox"


def test_num_parallel_through_the_stand_in_measures_reports_and_cleans_up(
    pytester: pytest.Pytester, tagged: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_first_on_path(monkeypatch)
    pytester.makepyfile(
        test_ollama="""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.ollama("gemma3-270m", num_parallel=2, context_length=512),
                           concurrency=[1, 2], max_tokens=10, rounds=1, warmup=False)
        def test_parallel(swarm):
            result = swarm.run()
            assert result.failures == 0
            assert result.facets.server.peak_streams == swarm.concurrency
            assert result.facets.server.server_decode_tps.median > 0

        @pytest.mark.swarm(server=Server.ollama("gemma3-270m", num_parallel=2, context_length=512),
                           concurrency=2, api="chat", turns=2, max_tokens=8, rounds=1, warmup=False)
        def test_chat_sessions(swarm):
            result = swarm.run()
            assert result.failures == 0 and [t.turn for t in result.facets.per_turn] == [1, 2]

        AGENT = Server.ollama("gemma3-270m", num_parallel=2, context_length=2048)

        @pytest.mark.swarm(server=AGENT, concurrency=2, api="chat", tools=["read_file", "run_tests"], turns=2,
                           tool_result_tokens=32, max_tokens=64, rounds=1, warmup=False, seed=7)
        def test_tool_session(swarm):
            swarm.run()

        @pytest.mark.swarm(server=AGENT, concurrency=1, api="chat", reasoning="on", max_tokens=8, rounds=1,
                           warmup=False)
        def test_think_on_a_model_that_cannot(swarm):
            swarm.run()
        """
    )
    result = pytester.runpytest_subprocess("-v", HW, "--swarm-json=out.json")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(['*HTTP 400: {"error": "\\"gemma3-270m\\" does not support thinking"}*'])
    result.stdout.fnmatch_lines(
        [
            "test *server*C*eff tok/s*req tok/s med*min*srv tok/s*TTFT p50*",
            "*test_parallel[[]c2[]]*ollama:gemma3-270m x2*",
        ]
    )
    _c1, c2, chat, tools, _think = json.loads((pytester.path / "out.json").read_text())["tests"]
    agent = tools["figures"]["agent"]
    assert tools["figures"]["failures"] == 0 and agent["tool_call_answers"] >= 1, (
        "Gemma 3 called the tools through the model's template, the calls came whole in message.tool_calls, and "
        "the next turn's tool messages (tool_name) were taken"
    )
    turns = chat["figures"]["per_turn"]
    assert turns[1]["prompt_tokens"] > turns[0]["prompt_tokens"] + 8, (
        "the second turn sent the first, its answer and a follow-up on /api/chat"
    )
    server = c2["server"]
    assert server["engine_version"] == "ollama 0.0.0-standin" and server["slots_check"] == "server log"
    assert server["model_source"].startswith("created from ") and server["model_source"].endswith(".gguf")
    figures = c2["figures"]
    assert figures["requests"] == 2 and 0 < figures["output_tokens"] <= 20
    assert figures["server_decode_tps"]["n"] == 2 and figures["per_request_tps"]["median"] > 0
    assert figures["cached_prompt_tokens"] is None, "Ollama reports no cached tokens"
    assert servers_left(tagged) == []


def test_a_model_that_cannot_be_pulled_fails_the_boot_with_ollamas_words(
    tmp_path: Path, tagged: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_first_on_path(monkeypatch)
    with pytest.raises(
        BootError, match=r"`.*ollama pull llama3.2:1b` failed \(exit status 1\):[\s\S]*Error: pull model manifest"
    ):
        launch(Server.ollama("llama3.2:1b"), LaunchSettings(log_dir=tmp_path, boot_timeout_s=60))
    assert servers_left(tagged) == []


def test_an_ollama_daemon_someone_else_runs_is_measured_with_the_ollama_protocol(
    pytester: pytest.Pytester, tmp_path: Path, tagged: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_first_on_path(monkeypatch)
    settings = LaunchSettings(log_dir=tmp_path, boot_timeout_s=120, ollama=str(STANDINS / "ollama"))
    daemon = launch(Server.ollama("gemma3-270m", num_parallel=1, context_length=256), settings)
    try:
        pytester.makepyfile(
            test_remote="""
            import pytest
            from pytest_swarm import Server

            @pytest.mark.swarm(server=Server.ollama("gemma3-270m"), max_tokens=6, rounds=1, warmup=False)
            def test_remote(swarm):
                result = swarm.run()
                assert result.failures == 0 and result.facets.server.server_decode_tps.n == 1
            """
        )
        result = pytester.runpytest_subprocess(
            "-q",
            HW,
            f"--swarm-endpoint={daemon.endpoint.base_url}",
            "--swarm-protocol=ollama",
            "--swarm-model=gemma3-270m",
        )
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines(["*test_remote*ollama@127.0.0.1:*:gemma3-270m*"])
    finally:
        daemon.stop()
    assert servers_left(tagged) == []


def test_an_ollama_server_sleeps_with_its_model_unloaded_and_wakes_with_it_loaded_again(
    tmp_path: Path, tagged: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sleep is `keep_alive: 0` on an empty prompt, the wake an empty prompt; /api/ps says what is in memory, and the
    stand-in's log counts the runner's loads (one at boot, one per wake)."""
    put_first_on_path(monkeypatch)
    spec = Server.ollama("gemma3-270m", num_parallel=1, context_length=256)
    mode = sleep_mode_for(spec)
    assert mode is not None
    server = launch(mode.enable(spec), LaunchSettings(log_dir=tmp_path, boot_timeout_s=120))
    base = server.endpoint.base_url

    def loaded() -> list[str]:
        return [m["name"] for m in httpx.get(base + "/api/ps").json()["models"]]

    def loads() -> int:
        return server.process.log_path.read_text().count("llama runner started in")

    try:
        assert loaded() == ["gemma3-270m:latest"] and loads() == 1
        sleeper = mode.sleeper(spec, server)
        sleeper.sleep()
        assert loaded() == [] and loads() == 1
        sleeper.wake()
        assert loaded() == ["gemma3-270m:latest"] and loads() == 2
        answer = httpx.post(
            base + "/api/generate",
            json={"model": "gemma3-270m", "prompt": "Hi", "options": {"num_predict": 2}},
            timeout=120,
        )
        assert answer.status_code == 200 and json.loads(answer.text.splitlines()[-1])["done"] is True
        assert loads() == 2, "served by the model the wake loaded"
    finally:
        server.stop()
    assert servers_left(tagged) == []
