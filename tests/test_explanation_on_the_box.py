"""The explanation of the gated figure, through pytest on the fake box: an A/B whose throughput claim decides gets
that ratio split into factors that multiply to it, and the one that explains it leads the failure; a latency claim
is led by the latency split. The factors' arithmetic is tests/figures/test_throughput.py's; on real llama.cpp,
tests/test_ab_plugin.py's."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from pytest_swarm import Server
from pytest_swarm.testing import FakeBox

HW = "--swarm-hardware=testbox"
ONE, FOUR = Server.llamacpp(slots=1), Server.llamacpp(slots=4)
SUITE = """
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server={server}, reference={reference}, concurrency=4, max_tokens=32{extra})
def test_ab(swarm):
    swarm.run()
"""


def _ab(pytester: pytest.Pytester, box: FakeBox, server: str, reference: str, extra: str = "") -> tuple[Any, Any]:
    pytester.makepyfile(test_ab=SUITE.format(server=server, reference=reference, extra=extra))
    result = pytester.runpytest(HW, "-p", "no:cacheprovider", "--swarm-json=out.json", plugins=[box])
    (document,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    return result, document


def _failure(result: pytest.RunResult) -> list[str]:
    """The failure's lines, after its header."""
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if line.startswith("_") and " test_ab " in line)
    return lines[start + 1 :]


def _product(factors: list[dict[str, Any]]) -> float:
    return math.prod(float(f["ratio"]) for f in factors)


def test_one_slot_against_four_fails_led_by_fewer_streams_decoding_at_once_though_each_is_faster(
    pytester: pytest.Pytester,
) -> None:
    """One slot serves the four agents one at a time, each stream 2.9 times faster: throughput falls, and the line
    that opens the failure says so, before the latency split (whose mean request is faster end to end)."""
    box = FakeBox({ONE: 290.0, FOUR: 100.0})
    result, document = _ab(pytester, box, "Server.llamacpp(slots=1)", "Server.llamacpp(slots=4)")
    result.assert_outcomes(failed=1)
    factors = document["throughput_factors"]
    assert [f["factor"] for f in factors] == ["decoding_at_once", "stream_tps"]
    at_once, per_stream = factors
    assert at_once["ratio"] < 0.5 and at_once["upper"] < 1 and per_stream["ratio"] == pytest.approx(2.9, rel=0.1)
    assert at_once["share"] > 1 > 0 > per_stream["share"] and at_once["share"] + per_stream["share"] == pytest.approx(1)
    (gated,) = [c for c in document["gate"]["comparisons"] if c["figure"] == "effective_tps"]
    assert _product(factors) == pytest.approx(gated["ratio"], rel=0.02), "the factors multiply to the gated ratio"
    failure = _failure(result)
    assert failure[0].startswith("throughput x0.") and " = streams decoding at once " in failure[0], failure[0]
    assert " x tokens a second a stream 10" in failure[0] and failure[1].startswith("where the time went: ")


def test_a_slower_decode_is_led_by_fewer_tokens_a_second_a_stream(pytester: pytest.Pytester) -> None:
    capped = Server.llamacpp(slots=4, env={"CAP": "1"})
    box = FakeBox({capped: 70.0, FOUR: 100.0})
    result, document = _ab(pytester, box, "Server.llamacpp(slots=4, env={'CAP': '1'})", "Server.llamacpp(slots=4)")
    result.assert_outcomes(failed=1)
    factors = document["throughput_factors"]
    assert factors[0]["factor"] == "stream_tps" and factors[0]["ratio"] == pytest.approx(0.7, rel=0.05)
    assert factors[0]["share"] > 0.5
    (gated,) = [c for c in document["gate"]["comparisons"] if c["figure"] == "effective_tps"]
    assert _product(factors) == pytest.approx(gated["ratio"], rel=0.02)


def test_a_latency_claim_is_led_by_the_latency_split(pytester: pytest.Pytester) -> None:
    """Only TTFT is claimed: no throughput was compared, so there are no factors, and the split leads."""
    box = FakeBox({ONE: 290.0, FOUR: 100.0})
    result, document = _ab(
        pytester,
        box,
        "Server.llamacpp(slots=1)",
        "Server.llamacpp(slots=4)",
        ", gate=[], expect={'ttft.p95': '<= 0.9'}",
    )
    result.assert_outcomes(failed=1)
    assert document["throughput_factors"] == []
    failure = _failure(result)
    assert failure[0].startswith("where the time went: "), failure[0]


def test_a_throughput_claim_beside_a_latency_claim_that_decided_first_puts_the_split_first(
    pytester: pytest.Pytester,
) -> None:
    """TTFT fails first in the gate's order, throughput beside it: the split of the latency leads, the factors
    follow."""
    box = FakeBox({ONE: 290.0, FOUR: 100.0})
    result, document = _ab(
        pytester,
        box,
        "Server.llamacpp(slots=1)",
        "Server.llamacpp(slots=4)",
        ", gate=['ttft.p95', 'effective_tps']",
    )
    result.assert_outcomes(failed=1)
    failure = _failure(result)
    assert failure[0].startswith("where the time went: ") and failure[1].startswith("throughput x0."), failure[:2]
    assert document["throughput_factors"][0]["factor"] == "decoding_at_once"


def test_clocks_that_report_different_parts_are_compared_on_what_both_measured_and_say_what_was_not(
    pytester: pytest.Pytester,
) -> None:
    """Two servers equally fast, one timing queue, prefill and decode (as vLLM does), the other prefill and decode
    only (as llama.cpp does): no FAIL, no component said to move, and the line names what only one side measured."""
    vllm_like, llama_like = Server.llamacpp(slots=4, env={"CLOCK": "all"}), Server.llamacpp(slots=4)
    box = FakeBox({vllm_like: 100.0, llama_like: 100.0}, clock_parts={llama_like: ("prefill", "decode")})
    result, document = _ab(pytester, box, "Server.llamacpp(slots=4, env={'CLOCK': 'all'})", "Server.llamacpp(slots=4)")
    result.assert_outcomes(passed=1)
    components = {c["component"] for c in document["where_time_went"]}
    assert components == {"prefill", "decode"}, "only what both clocks measured"
    assert all(c["lower"] <= 0 <= c["upper"] for c in document["where_time_went"]), "nothing said to move"
    line = document["where"]["line"]
    assert (
        "not compared, one side's clock only: queue (candidate's), client (candidate's), unaccounted (reference's)"
        in (line)
    ), line
