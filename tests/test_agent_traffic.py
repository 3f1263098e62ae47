"""A reasoning model and a tool-calling agent, measured right: through pytest, against a server on an exact clock.

The stand-in (tests/standins/reasoning_standin.py) sends its first token 100 ms after each request, then one token
every 10 ms: 40 of thought, 8 of answer, in each engine's documented field (vLLM's `delta.reasoning` with the count
in usage, llama.cpp's and SGLang's `delta.reasoning_content`, Ollama's `thinking`). The figures must recover that
clock: TTFT at the first token of any kind, the first answer token after the thought, the decode speed over the
whole stream. Before they read reasoning, TTFT came out 5x late and the decode rate 6x high, and a thought cut by
max_tokens or an answer that was a tool call failed the item with a false slot diagnosis.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.standins import STANDINS

FIRST_S, STEP_S, THINK, ANSWER = 0.100, 0.010, 40, 8

SUITE = f"""
import sys
import pytest
from pytest_swarm import Server

def serving(shape, *more, protocol="openai"):
    argv = [sys.executable, {str(STANDINS / "reasoning_standin.py")!r}, "--port", "{{port}}", "--shape", shape, *more]
    return Server.command(argv, ready="/health", protocol=protocol, slots=2, model="standin")

COMMON = dict(api="chat", concurrency=2, max_tokens=64, pinned=False, rounds=2)

@pytest.mark.swarm(server=serving("vllm"), **COMMON)
def test_vllm(swarm):
    swarm.run()

@pytest.mark.swarm(server=serving("llamacpp"), **COMMON)
def test_llamacpp(swarm):
    swarm.run()

@pytest.mark.swarm(server=serving("sglang"), **COMMON)
def test_sglang(swarm):
    swarm.run()

@pytest.mark.swarm(server=serving("ollama", protocol="ollama"), **COMMON)
def test_ollama_chat(swarm):
    swarm.run()

@pytest.mark.swarm(server=serving("ollama", protocol="ollama"), **{{**COMMON, "api": "completions"}})
def test_ollama_generate(swarm):
    swarm.run()

@pytest.mark.swarm(server=serving("vllm"), **{{**COMMON, "max_tokens": 16}})
def test_cut(swarm):
    swarm.run()

@pytest.mark.swarm(server=serving("vllm", "--tool", "--think", "0"), tools="coding", **COMMON)
def test_tool(swarm):
    swarm.run()

@pytest.mark.swarm(server=serving("ollama", "--tool", "--think", "0", protocol="ollama"), tools="coding", **COMMON)
def test_ollama_tool(swarm):
    swarm.run()
"""
THINKING = ("test_vllm", "test_llamacpp", "test_sglang", "test_ollama_chat", "test_ollama_generate")


@pytest.mark.quiet  # the stand-ins' timings within 10%: beside another xdist worker and a loaded host it read 0.111 s
def test_reasoning_and_tool_calls_are_measured_as_the_stream_sent_them(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_reasoning=SUITE)
    result = pytester.runpytest("--swarm-history=off", "--swarm-json=out.json")
    result.assert_outcomes(passed=8)
    tests = json.loads((pytester.path / "out.json").read_text())["tests"]
    figures = {t["nodeid"].rsplit("::", 1)[-1]: t["figures"] for t in tests}
    for item in THINKING:
        thinking_is_measured_as_sent(figures[item], item)
    a_thought_cut_by_max_tokens_is_no_failure(figures["test_cut"])
    for item in ("test_tool", "test_ollama_tool"):
        a_tool_call_answer_has_its_ttft_and_counts_as_one(figures[item], item)
    text = result.stdout.str()
    assert (
        "test_vllm: TTFT p50 10" in text and "reasoning tokens p50 40 (counted by server), answer tokens p50 8" in text
    )
    assert "test_tool: " in text and "tool calls: 4 of 4 answers (100%), 4 calls, 0 with arguments" in text


def close(value: object, expected: float, within: float = 0.10) -> bool:
    assert isinstance(value, float)
    return abs(value - expected) <= within * expected


STREAM_TPS = 1 / STEP_S
"""What the decode speed must read: a token every 10 ms over the whole stream, thought included."""


def thinking_is_measured_as_sent(f: dict[str, Any], item: str) -> None:
    """TTFT is the first token's, the decode speed the whole stream's, the first answer token the thought's end."""
    assert f["failures"] == 0 and f["requests"] == 4, (item, f["failure_causes"])
    # The medians within the 10%; the tails within 25%: the stand-in's own timers wake late on a busy machine.
    assert close(f["ttft"]["p50"], FIRST_S) and close(f["ttft"]["max"], FIRST_S, 0.25), f["ttft"]
    assert close(f["per_request_tps"]["p50"], STREAM_TPS) and close(f["per_request_tps"]["min"], STREAM_TPS, 0.25)
    assert close(f["ttft_answer"]["p50"], FIRST_S + THINK * STEP_S), "the first answer token comes after the thought"
    agent = f["agent"]
    assert agent["reasoning_tokens"]["p50"] == THINK and agent["answer_tokens"]["p50"] == ANSWER
    assert agent["reasoning_counted_by"] == ("server" if item == "test_vllm" else "chunks")
    assert agent["finish_reasons"] == {"stop": 4}


def a_thought_cut_by_max_tokens_is_no_failure(f: dict[str, Any]) -> None:
    assert f["failures"] == 0 and close(f["ttft"]["p50"], FIRST_S)
    assert f["ttft_answer"]["n"] == 0 and f["agent"]["thought_only"] == 4
    assert f["agent"]["finish_reasons"] == {"length": 4} and f["output_tokens"] == 4 * 16


def a_tool_call_answer_has_its_ttft_and_counts_as_one(f: dict[str, Any], item: str) -> None:
    """An OpenAI tool call streams from its first token; Ollama's comes whole, on the answer's last one."""
    assert f["failures"] == 0 and close(f["ttft"]["p50"], FIRST_S if item == "test_tool" else FIRST_S + 7 * STEP_S)
    agent = f["agent"]
    assert agent["tool_call_answers"] == 4 and agent["tool_call_share"] == 1.0 and agent["invalid_tool_calls"] == 0
    assert agent["finish_reasons"] == ({"tool_calls": 4} if item == "test_tool" else {"stop": 4})
