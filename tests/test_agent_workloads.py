"""Agent workloads through pytest itself, on the real embedded engine: sessions warm and cold against llama.cpp's prompt
cache, open-loop arrivals on the real event loop, datasets and production traces fitted to its context, its tool calls.

One file, one two-slot server for every item that can share it (the pool boots it once; pinned apart from the harness,
cpus=, so the open-loop item keeps its schedule). What the plugin decides of such traffic (an open loop whose sends fall
behind, a goodput share below its SLO, a warm session on a server that reuses nothing, a trace's replay) is the fake
box's (tests/test_items_on_the_box.py).
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import server_cpus, servers_left
from tests.workload_files import workload_items, write_workload_files

pytestmark = pytest.mark.e2e(reason="llama.cpp's real prompt cache, context and tool-call template under agent traffic")

SUITE = f"""
import pytest
from pytest_swarm import Server

TWO = Server.llamacpp(slots=2, cpus={server_cpus()!r})  # the harness keeps a CPU of its own: test_open checks its schedule
SESSIONS = dict(server=TWO, concurrency=2, turns=3, system_prompt=64, max_tokens=8, rounds=1)

@pytest.mark.swarm(cache="warm", **SESSIONS)
def test_warm(swarm):
    result = swarm.run()
    assert [t.turn for t in result.facets.per_turn] == [1, 2, 3]

@pytest.mark.swarm(cache="cold", **SESSIONS)
def test_cold(swarm):
    swarm.run()

@pytest.mark.swarm(server=TWO, rate=4, requests=6, arrival="poisson", max_tokens=8, rounds=1, goodput={{"ttft": "< 30", "tpot": "< 5"}})
def test_open(swarm):
    swarm.run()
"""


def test_agent_workloads_on_the_real_engine(pytester: pytest.Pytester, tagged: str) -> None:
    """llama.cpp's prompt cache serves a warm session's earlier turns and none of a cold one's; its open loop keeps
    the schedule on a real server. (A session's figures turn by turn, the warning when a server reuses nothing, and a
    trace's replay are the fake box's: tests/test_items_on_the_box.py.)"""
    pytester.makepyfile(test_agents=SUITE)
    result = pytester.runpytest_subprocess("--swarm-hardware=testbox", "--swarm-json=out.json", "--swarm-history=off")
    items = {t["nodeid"].rsplit("::", 1)[-1]: t for t in json.loads((pytester.path / "out.json").read_text())["tests"]}
    result.assert_outcomes(passed=3)

    warm, cold = items["test_warm"]["figures"], items["test_cold"]["figures"]
    later = [t for t in warm["per_turn"] if t["turn"] > 1]
    assert all(t["cached_prompt_tokens"] >= 0.5 * t["cacheable_tokens"] for t in later), warm["per_turn"]
    assert all(t["cached_prompt_tokens"] == 0 for t in cold["per_turn"]), "cold: every request paid its whole prefill"

    opened = items["test_open"]["figures"]
    assert opened["requests"] == 6 and opened["failures"] == 0
    assert opened["achieved_rate"] > 0 and opened["send_lateness"]["n"] == 6 and opened["send_lateness"]["p99"] < 0.01
    assert opened["goodput_share"] == 1.0 and opened["goodput"] > 0 and opened["tpot"]["n"] == 6
    assert servers_left(tagged) == []


OVERSIZED = """
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server=Server.llamacpp(ctx=1024), prompts="long.jsonl", max_tokens=64, rounds=1)
def test_oversized_prompt(swarm):
    swarm.run()
"""


@pytest.mark.functional
def test_a_prompt_beyond_the_servers_context_by_its_own_tokenizer_is_refused_before_the_round(
    pytester: pytest.Pytester, tagged: str
) -> None:
    """The server says its slot holds 1024 tokens (/props n_ctx); the dataset's line 2 holds 1200 words (each "the", a
    token by llama.cpp's /tokenize) under an answer of 64: no request is sent. (A trace's request lengths need no
    tokenizer: that refusal is the fake box's, tests/test_items_on_the_box.py.)"""
    chats = [{"messages": [{"role": "user", "content": text}]} for text in ("Hello there.", " ".join(["the"] * 1200))]
    (pytester.path / "long.jsonl").write_text("".join(json.dumps(line) + "\n" for line in chats))
    pytester.makepyfile(test_oversized=OVERSIZED)
    result = pytester.runpytest_subprocess("--swarm-hardware=testbox", "--swarm-json=out.json", "--swarm-history=off")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*refused before the round: 1 of 2 prompts cannot fit llamacpp* context of 1024 tokens a request (what the "
            "server said at boot), prompt and answer together, ~16 of template a turn, counted by the server's "
            "tokenizer (POST /tokenize, llamacpp): *long.jsonl:2: needs 128?. *",
        ]
    )
    assert "HTTP 400" not in result.stdout.str()
    assert servers_left(tagged) == []


DATASETS = """
import pytest
from pytest_swarm import Server

TWO = Server.llamacpp(slots=2, ctx=1024, cpus={cpus!r})

"""


@pytest.mark.functional
def test_datasets_and_production_traces_fitted_to_the_box_on_the_real_engine(
    pytester: pytest.Pytester, tagged: str
) -> None:
    """ShareGPT's and OpenAI-chat's files, a window of a Mooncake-scale trace fitted to a 270M model's context, and an
    Alibaba session trace: each replays on llama.cpp with no failure, the trace's shared blocks served from the cache and
    every later turn of a session sent only after its parent's answer."""
    write_workload_files(pytester.path)
    pytester.makepyfile(test_datasets=DATASETS.format(cpus=server_cpus()) + workload_items("TWO"))
    result = pytester.runpytest_subprocess("--swarm-hardware=testbox", "--swarm-json=out.json", "--swarm-history=off")
    text = result.stdout.str()
    result.assert_outcomes(passed=5)
    items = {
        t["nodeid"].rsplit("::", 1)[-1]: t["figures"]
        for t in json.loads((pytester.path / "out.json").read_text())["tests"]
    }

    sharegpt, chat, mooncake, bailian = (items[name] for name in ("test_sharegpt", "test_chat_dataset",
                                                                   "test_mooncake_window", "test_bailian_sessions"))  # fmt: skip
    assert sharegpt["requests"] == 4 and sharegpt["failures"] == 0 and sharegpt["output_tokens"] == 32
    assert [t["turn"] for t in chat["per_turn"]] == [1, 2, 3], "the longer conversation's three user turns, in order"
    assert [t["requests"] for t in chat["per_turn"]] == [2, 2, 1] and chat["failures"] == 0

    assert mooncake["failures"] == 0 and mooncake["short_outputs"] == 0
    assert mooncake["cached_prompt_tokens"] > 0, "each turn's earlier blocks were served from the cache"
    result.stdout.fnmatch_lines(
        ["test_mooncake_window: the trace as replayed, fitted to this box: window 0-12 s: * of 24 requests; "
         "lengths x0.04 (block 512 -> 21 tokens); answers capped at 12 tokens: * cut"]
    )  # fmt: skip

    assert bailian["requests"] == 9 and bailian["failures"] == 0
    # Six of the nine turns have a parent; each was due 100 ms after it was sent, before its 24-token answer came back.
    assert bailian["wait"]["n"] == 9 and bailian["wait"]["p50"] > 0.1, bailian["wait"]
    assert bailian["ttft_from_due"]["p50"] > bailian["ttft"]["p50"]
    assert "6 held back by their parent turn's answer" in text, "the parents' wait is not the generator's lateness"
    lengths = items["test_dataset_lengths"]
    assert lengths["requests"] == 4 and lengths["output_tokens"] == 3 + 6 + 12 + 24 and lengths["short_outputs"] == 0, (
        "each answer pinned to the length of the one the dataset recorded, as llama.cpp's /tokenize counted it"
    )
    assert (
        "test_dataset_lengths: answers pinned to the lengths the dataset recorded, counted by the server's tokenizer "
        "(POST /tokenize, llamacpp)" in text
    )
    assert "HTTP 400" not in text
    assert servers_left(tagged) == []


TOOLS_SUITE = """
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server=Server.llamacpp(slots=2), api="chat", tools=["read_file", "run_tests", "search_code"],
                   tool_choice="required", concurrency=2, turns=2, tool_result_tokens=96, max_tokens=48, rounds=1)
def test_tool_session(swarm):
    swarm.run()
"""


@pytest.mark.functional
def test_a_tool_calling_session_on_the_real_engine(pytester: pytest.Pytester, tagged: str) -> None:
    """Gemma 3 270M answers with tool calls through llama.cpp's own tool-call parsing (the template that knows tools
    is the plugin's: the GGUF has none), and the next turn carries each call's result."""
    pytester.makepyfile(test_tools=TOOLS_SUITE)
    result = pytester.runpytest_subprocess("--swarm-hardware=testbox", "--swarm-json=out.json", "--swarm-history=off")
    result.assert_outcomes(passed=1)
    figures = json.loads((pytester.path / "out.json").read_text())["tests"][0]["figures"]
    assert figures["failures"] == 0 and figures["ttft"]["n"] == 4 and figures["ttft_answer"]["n"] >= 1
    first, second = figures["per_turn"]
    assert second["prompt_tokens"] - first["prompt_tokens"] > 120, "the answer's call and its 96-token result went back"
    agent = figures["agent"]
    assert agent["tool_calls"] >= 1 and agent["tool_call_share"] > 0
    result.stdout.fnmatch_lines(
        [
            "*test_tool_session: TTFT p50 * (first token of any kind), first answer token p50*",
            "*tool calls: * of 4 answers (*%), * calls, * with arguments that are not a JSON object",
        ]
    )
    assert servers_left(tagged) == []
