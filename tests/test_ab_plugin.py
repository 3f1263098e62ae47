"""A/B in one run through pytest itself, on the real embedded engine: candidate and reference booted alternately.

One llama.cpp thread against two is a regression of about half the throughput on
these 2-core machines, far past the engine's noise, so that verdict is FAIL; a
server against itself must never FAIL; four slots against one at C=4 PASS an
expected TTFT ratio; one boot a side with a 5% tolerance cannot
show equivalence, and says how many boots would. Tokens and rounds are few: each
item boots four or two servers.
"""

from __future__ import annotations

import json
from statistics import fmean
from typing import Any

import pytest

from pytest_swarm.gate.verdict import BUSY_HOST_CORES
from tests.conftest import servers_left

pytestmark = pytest.mark.e2e

HW = "--swarm-hardware=testbox"
SUITE = """
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server={server}, reference={reference}, max_tokens={tokens}, rounds={rounds}{extra})
def test_ab(swarm):
    result = swarm.run()
    assert swarm.reference is not None and swarm.reference is not result
    assert result.failures == 0 and swarm.reference.failures == 0
"""


def _run(
    pytester: pytest.Pytester, server: str, reference: str, rounds: int, extra: str, *args: str, tokens: int = 16
) -> tuple[pytest.RunResult, dict[str, Any]]:
    pytester.makepyfile(test_ab=SUITE.format(server=server, reference=reference, rounds=rounds, extra=extra, tokens=tokens))
    result = pytester.runpytest_subprocess(HW, "-v", "--swarm-json=out.json", *args)  # -v: a line per round, showing the boot order
    (document,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    return result, document


def test_one_thread_against_two_fails_as_a_regression(pytester: pytest.Pytester, tagged: str) -> None:
    """threads=1 candidate, threads=2 reference, booted A B B A A B B A ...: the candidate's throughput is far below 1 - tolerance: FAIL.

    One thread cost 27-50% of the throughput on a 2-core EPYC (the more, the quieter
    the host), and the spread between boots was ~8% on a quiet host but 16% on a
    drifting CI runner (the reference rose 27 -> 38 tok/s over four pairs, the candidate
    did not): there four pairs at alpha 0.01 left a 29% drop unsure (upper bound 1.01).
    Eight pairs at alpha 0.05 catch a 27% drop at a 16% spread 79% of the time, a 35%
    one 98%, and either at 8% spread >99% (Welch, simulated); the false-alarm side at
    the default alpha is the server-against-itself test's.
    """
    result, document = _run(
        pytester, "Server.llamacpp(threads=1)", "Server.llamacpp(threads=2)", 2, ", boots=8, gate=['effective_tps']", "--swarm-alpha=0.05"
    )
    rounds = [r for side in (document, document["reference"]) for r in side["figures"]["rounds"] if r["other_cpu_cores"] is not None]
    busy = [r["other_cpu_cores"] + (r["steal_cores"] or 0.0) for r in rounds]
    if busy and fmean(busy) > BUSY_HOST_CORES:
        # Two llama.cpp threads on two cores that other processes (or other VMs) also want wait on each other and run slower than one:
        # then threads=2 is no known improvement, and the test has nothing to check (measured on a shared machine: 2.8x the other way).
        pytest.skip(f"other processes and steal took {fmean(busy):.2f} cores during the rounds: threads=2 is no faster than 1 on a busy host")
    result.assert_outcomes(failed=1)
    order = [line.split(":", 1)[1].split(" boot ")[0].strip() for line in result.outlines if "test_ab: " in line and " round 1/2:" in line]
    assert order == ["candidate", "reference", "reference", "candidate"] * 4, "pairs alternate A B, B A"
    result.stdout.fnmatch_lines(
        [
            "*test_ab.py::test_ab: swarm gate FAIL",
            "*effective_tps (higher is better): reference *, measured *, ratio 0.*, tolerance 10%: FAIL",
        ]
    )
    gate = document["gate"]
    assert gate["verdict"] == "fail" and gate["against"] == "reference"
    assert document["server"]["threads"] == 1 and document["reference"]["server"]["threads"] == 2
    assert document["boots"] == 8 and document["reference"]["boots"] == 8
    assert "vs reference" in result.stdout.str() and "no baseline" not in result.stdout.str()
    assert servers_left(tagged) == []


def test_four_slots_against_one_pass_an_expected_ttft_ratio(pytester: pytest.Pytester, tagged: str) -> None:
    """C=4 on four slots against one: a request queued behind three others waits for their 32 tokens, so TTFT p95
    falls to about a quarter whatever the runner's speed (the main job's claim, measured 0.22 here): PASS, decided.

    Five pairs of 32 tokens. With two pairs of 16 tokens the ratio (0.40) was right but its bound, on two
    degrees of freedom, reached 12.8. With three, as the main job, one run in three here left it undecided:
    one boot's TTFT p95 is the slowest of four requests, the four-slot side's spread between boots reached
    25% while the one-slot side's stayed near 4%, and Welch's test then has about two degrees of freedom
    (x0.28, bound 0.74). Simulated at that spread, three pairs decide it about half the time, five 97%.
    """
    result, document = _run(
        pytester, "Server.llamacpp(slots=4)", "Server.llamacpp(slots=1)", 1,
        ", concurrency=4, boots=5, gate=[], expect={'ttft.p95': '<= 0.6'}", tokens=32,
    )
    result.assert_outcomes(passed=1)
    gate = document["gate"]
    assert gate["verdict"] == "pass" and gate["against"] == "reference"
    (claim,) = gate["comparisons"]
    assert claim["figure"] == "ttft.p95" and claim["expected"] == "<= 0.6" and claim["verdict"] == "pass"
    result.stdout.fnmatch_lines(["*vs reference*x0.* [[]-,0.*[]]"])  # the ratio and its upper bound, under 0.6
    assert servers_left(tagged) == []


def test_a_server_against_itself_never_fails(pytester: pytest.Pytester, tagged: str) -> None:
    """The same spec on both sides: PASS when the bounds show it, else INCONCLUSIVE; never FAIL, never compared to a stored baseline."""
    result, document = _run(pytester, "Server.llamacpp()", "Server.llamacpp()", 2, ", gate=['effective_tps']")
    result.assert_outcomes(passed=1)
    assert document["gate"]["verdict"] in ("pass", "inconclusive")
    (claim,) = document["gate"]["comparisons"]
    assert claim["figure"] == "effective_tps" and claim["verdict"] != "fail"
    assert not (pytester.path / "baselines" / "testbox.yaml").exists(), "no stored baseline is written for an A/B item"
    assert servers_left(tagged) == []


def test_one_boot_a_side_at_a_tight_tolerance_says_how_many_boots_would_decide(pytester: pytest.Pytester, tagged: str) -> None:
    """boots=1, rounds=1, 5% tolerance: one sample a side (one degree of freedom) cannot decide; --swarm-strict fails it with the estimate.

    With one sample a side the bound is t(0.99, 1) = 31.8 floored spreads wide: only a
    ratio past about 3.8x either way would be decided, which the same server never gives.
    (Three rounds a side at 1% decided it: one server against itself once measured x1.14.)
    """
    result, document = _run(
        pytester, "Server.llamacpp()", "Server.llamacpp()", 1, ", boots=1, tolerance=0.05, gate=['effective_tps']", "--swarm-strict"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*swarm gate INCONCLUSIVE",
            "*effective_tps (higher is better): reference *, tolerance 5%: INCONCLUSIVE; ~* boots a side would most likely decide it",
            "*the verdict rests on one boot a side*",
        ]
    )
    (claim,) = document["gate"]["comparisons"]
    assert claim["verdict"] == "inconclusive" and claim["boots_to_decide"] >= 2
    assert servers_left(tagged) == []
