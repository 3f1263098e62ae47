"""A/B in one run through pytest itself, on the real embedded engine: both servers up, pairs of rounds until decided.

A server against itself must never FAIL; the same server held by a cgroup to 70% of
the machine's cores (a quarter of its throughput lost: x0.74 [0.72, 0.76] on a 2-core
EPYC, benchmarks/gating_results.txt) must FAIL, with the marker's defaults, in one run;
four slots against one at C=4 PASS an expected TTFT ratio; a search stopped by its
budget says so and how many samples would decide it. The PASS rate is the
benchmark's to show (benchmarks/gating.py), not this file's.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from tests.conftest import servers_left
from tests.cpu_cap import capped

pytestmark = pytest.mark.e2e

HW = "--swarm-hardware=testbox"
SUITE = """
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server={server}, reference={reference}, concurrency=4{extra})
def test_ab(swarm):
    result = swarm.run()
    assert swarm.reference is not None and swarm.reference is not result
"""
CAPPED_CORES = 0.5 * (os.cpu_count() or 2)
"""The candidate's cap in the regression test: one of the two cores here, a drop the test decides at its first looks
(at 70% of the cores, a 25% drop, CI's run took from 104 to 276 s to decide it; the gate's rates at smaller drops are
benchmarks/gating.py's)."""


def _run(
    pytester: pytest.Pytester, server: str, reference: str, extra: str, *args: str
) -> tuple[pytest.RunResult, dict[str, Any]]:
    pytester.makepyfile(test_ab=SUITE.format(server=server, reference=reference, extra=extra))
    result = pytester.runpytest_subprocess(HW, "-v", "--swarm-json=out.json", *args)
    (document,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    return result, document


def test_a_candidate_capped_to_fewer_cores_fails_as_a_regression(pytester: pytest.Pytester, tagged: str) -> None:
    """The same four-slot server on both sides, the candidate's held by a cgroup to half the cores: FAIL, with the defaults.

    Either throughput figure may be the one that decides first (the verdict is FAIL when any figure FAILs),
    so the line matched is a FAIL of a tok/s figure, not of one named figure.
    """
    with capped("swarm-e2e-candidate", CAPPED_CORES) as moved:
        result, document = _run(
            pytester,
            "Server.llamacpp(slots=4, env={'SWARM_CPU_CAP': 'swarm-e2e-candidate'})",
            "Server.llamacpp(slots=4)",
            ", max_tokens=32, max_seconds=420",
        )
    assert moved, "the cap found the candidate's server"
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_ab.py::test_ab: swarm gate FAIL",
            "*_tps* (higher is better): reference *, measured *, ratio 0.*, tolerance 5%: FAIL after * sample(s)",
            "*note: * boot(s) of both sides, * pair(s) of rounds in random order (both servers up)",
        ]
    )
    gate = document["gate"]
    assert gate["verdict"] == "fail" and gate["against"] == "reference"
    rounds = document["figures"]["rounds"]
    assert all(r["pair"] is not None for r in rounds) and len({r["boot"] for r in rounds}) >= 2, (
        "pairs of rounds, rebooted"
    )
    assert servers_left(tagged) == []


def test_a_server_against_itself_never_fails(pytester: pytest.Pytester, tagged: str) -> None:
    """The same spec on both sides, the defaults: PASS when the bounds show it, else INCONCLUSIVE at the budget; never FAIL.

    A budget of half a minute: the verdict's rates are benchmarks/gating.py's to show; here, that nothing FAILs."""
    result, document = _run(
        pytester, "Server.llamacpp(slots=4)", "Server.llamacpp(slots=4)", ", max_tokens=16, max_seconds=30"
    )
    result.assert_outcomes(passed=1)
    assert document["gate"]["verdict"] in ("pass", "inconclusive")
    assert all(c["verdict"] != "fail" for c in document["gate"]["comparisons"])
    assert {c["figure"] for c in document["gate"]["comparisons"]} == {"effective_tps", "per_request_tps.median"}
    assert not (pytester.path / "baselines" / "testbox.yaml").exists(), "no stored baseline is written for an A/B item"
    assert servers_left(tagged) == []


def test_four_slots_against_one_pass_an_expected_ttft_ratio(pytester: pytest.Pytester, tagged: str) -> None:
    """C=4 on four slots against one: a request queued behind three others waits for their 16 tokens, so TTFT p95
    falls to about a quarter whatever the runner's speed (the main job's claim): PASS, decided; the wait it no longer
    has is where its time went.

    Paired with the idle side asleep (pairing="sleep": on CPU its processes stopped, SIGSTOP, and continued before its
    turn, as a GPU server sleeps in vLLM's sleep mode): every round answered, the switches timed in the notes, and no
    server left behind, stopped or not."""
    result, document = _run(
        pytester,
        "Server.llamacpp(slots=4)",
        "Server.llamacpp(slots=1)",
        ", max_tokens=16, gate=[], expect={'ttft.p95': '<= 0.6'}, pairing='sleep'",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*test_ab: pairing: sleeping: asked for (pairing='sleep')*; * sleep(s), median * s, and * wake(s)*"]
    )
    for side in (document, document["reference"]):
        assert all(r["failures"] == 0 for r in side["figures"]["rounds"]), "no request failed for a stopped server"
    gate = document["gate"]
    assert gate["verdict"] == "pass" and gate["against"] == "reference"
    (claim,) = gate["comparisons"]
    assert claim["figure"] == "ttft.p95" and claim["expected"] == "<= 0.6" and claim["verdict"] == "pass"
    result.stdout.fnmatch_lines(["*vs reference*x0.* [[]-,0.*[]]"])  # the ratio and its upper bound, under 0.6
    # where the time went (issue 48): llama.cpp times no wait for a slot, so the one slot's wait is "unaccounted",
    # never called queue, with the deferred requests beside it
    first = document["where_time_went"][0]
    assert first["component"] == "unaccounted" and first["upper"] < 0, document["where_time_went"]
    assert "queue" not in {c["component"] for c in document["where_time_went"]}, "llama.cpp times no queue"
    state = {s["name"]: s for s in document["where"]["state"]}
    assert state["waiting_peak"]["reference"] > state["waiting_peak"]["candidate"], state
    assert servers_left(tagged) == []


def test_a_search_stopped_by_its_budget_says_so_and_how_many_samples_would_decide(
    pytester: pytest.Pytester, tagged: str
) -> None:
    """max_pairs=4 (two samples) at a 1% tolerance cannot decide; --swarm-strict fails it, naming the budget and the estimate."""
    result, document = _run(
        pytester,
        "Server.llamacpp(slots=4)",
        "Server.llamacpp(slots=4)",
        ", max_tokens=16, max_pairs=4, tolerance=0.01, gate=['effective_tps']",
        "--swarm-strict",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*swarm gate INCONCLUSIVE",
            "*effective_tps (higher is better): reference *, tolerance 1%: INCONCLUSIVE after 2 sample(s)*",
            "*note: the search ended undecided at max_pairs=4",
        ]
    )
    (claim,) = document["gate"]["comparisons"]
    assert claim["verdict"] == "inconclusive" and claim["samples"] == 2
    assert servers_left(tagged) == []


SWEEP = """
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server=Server.llamacpp(slots=4), reference=Server.llamacpp(slots=4), concurrency=[1, 4],
                   max_tokens=16, max_seconds=30)
def test_ab(swarm):
    result = swarm.run()
    assert swarm.reference is not None and result.agents in (1, 4)
"""


def test_a_sweeps_levels_are_measured_on_the_same_boots(pytester: pytest.Pytester, tagged: str) -> None:
    """An A/B sweep through pytest: the first level's item plays both levels' pairs on each boot of both sides
    (run/round_pairs.py), the second level's item reports its own rounds at its own concurrency, its own verdict, and
    boots nothing; both notes say the boots were shared."""
    pytester.makepyfile(test_sweep=SWEEP)
    result = pytester.runpytest_subprocess(HW, "-v", "--swarm-json=out.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*test_ab?c1?: pairing: co-located: *; levels test_ab[[]c1[]], test_ab[[]c4[]] measured on the same boots",
            "*test_ab?c4?: pairing: co-located: *; levels test_ab[[]c1[]], test_ab[[]c4[]] measured on the same boots",
        ]
    )
    c1, c4 = json.loads((pytester.path / "out.json").read_text())["tests"]
    boots = []
    for document, agents in ((c1, 1), (c4, 4)):
        assert document["gate"]["verdict"] in ("pass", "inconclusive"), document["gate"]
        for side in (document, document["reference"]):
            rounds = side["figures"]["rounds"]
            assert {r["requests"] for r in rounds} == {agents} and all(r["pair"] is not None for r in rounds)
        boots.append({r["boot"] for r in document["figures"]["rounds"]})
    assert boots[0] & boots[1] and len(boots[0] | boots[1]) >= 2, boots
    assert servers_left(tagged) == []
