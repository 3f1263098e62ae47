"""Whole items of every kind through pytest itself, on the fake box (pytest_swarm.testing): A/B, a stored baseline
with its canary, capacity searches, a sweep sharing its boots. The box's speeds are declared, so each verdict follows
from the gate's statistics; the real engines' own behaviour is the e2e tier's (tests/test_ab_plugin.py,
tests/test_capacity_plugin.py, tests/test_canary_plugin.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_swarm import Server
from pytest_swarm.gate.entries import FigureBaseline
from pytest_swarm.gate.entries import TestBaseline as Entry
from pytest_swarm.load.trace import load_trace, shared_tokens
from pytest_swarm.stores import baselines
from pytest_swarm.testing import DEFAULT_SPEED, FakeBox, Faults

HW = "--swarm-hardware=testbox"
EXAMPLES = Path(__file__).parents[1] / "examples"
FOUR = Server.llamacpp(slots=4)
FOUR_TEXT = "Server.llamacpp(slots=4)"
CAPPED = Server.llamacpp(slots=4, env={"CAP": "1"})
AB = """
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server={server}, reference={reference}, concurrency=4{extra})
def test_ab(swarm):
    result = swarm.run()
    assert swarm.reference is not None and swarm.reference is not result
"""


def _run(pytester: pytest.Pytester, box: FakeBox, *args: str) -> pytest.RunResult:
    return pytester.runpytest(HW, "-v", "-p", "no:cacheprovider", "--swarm-json=out.json", *args, plugins=[box])


def _documents(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    tests = json.loads((pytester.path / "out.json").read_text())["tests"]
    assert isinstance(tests, list)
    return tests


def _ab(
    pytester: pytest.Pytester, box: FakeBox, server: str, reference: str, extra: str, *args: str
) -> tuple[pytest.RunResult, dict[str, Any]]:
    pytester.makepyfile(test_ab=AB.format(server=server, reference=reference, extra=extra))
    result = _run(pytester, box, *args)
    (document,) = _documents(pytester)
    return result, document


def test_a_slower_candidate_fails_as_a_regression_in_pairs_of_rounds_rebooted(pytester: pytest.Pytester) -> None:
    box = FakeBox({CAPPED: 75.0, FOUR: 100.0})
    result, document = _ab(
        pytester, box, "Server.llamacpp(slots=4, env={'CAP': '1'})", "Server.llamacpp(slots=4)", ", max_tokens=32"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_ab.py::test_ab: swarm gate FAIL",
            "*_tps* (higher is better): reference *, measured *, ratio 0.7*, tolerance 5%: FAIL after * sample(s)",
            "*note: * boot(s) of both sides, * pair(s) of rounds in random order (both servers up)",
        ]
    )
    gate = document["gate"]
    assert gate["verdict"] == "fail" and gate["against"] == "reference"
    rounds = document["figures"]["rounds"]
    assert all(r["pair"] is not None for r in rounds) and len({r["boot"] for r in rounds}) >= 2
    assert len(box.boots) == 2 * len({r["boot"] for r in rounds}), "both sides booted anew for every sample"


def test_a_server_against_itself_passes_and_writes_no_baseline(pytester: pytest.Pytester) -> None:
    result, document = _ab(
        pytester,
        FakeBox(),
        "Server.llamacpp(slots=4)",
        "Server.llamacpp(slots=4)",
        ", max_tokens=16",
        "--swarm-update-baselines",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["swarm baselines: none updated (no item of this run is checked against a stored*"])
    assert document["gate"]["verdict"] == "pass", document["gate"]
    assert {c["figure"] for c in document["gate"]["comparisons"]} == {"effective_tps", "per_request_tps.median"}
    assert not (pytester.path / "baselines" / "testbox.yaml").exists(), "no stored baseline is written for an A/B item"


def test_four_slots_against_one_pass_an_expected_ttft_ratio_with_the_idle_side_paused(
    pytester: pytest.Pytester,
) -> None:
    box = FakeBox()
    result, document = _ab(
        pytester,
        box,
        "Server.llamacpp(slots=4)",
        "Server.llamacpp(slots=1)",
        ", max_tokens=16, gate=[], expect={'ttft.p95': '<= 0.6'}, pairing='sleep'",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_ab: pairing: sleeping: asked for (pairing='sleep')*"])
    (claim,) = document["gate"]["comparisons"]
    assert claim["figure"] == "ttft.p95" and claim["expected"] == "<= 0.6" and claim["verdict"] == "pass"
    result.stdout.fnmatch_lines(["*vs reference*x0.* [[]-,0.*[]]"])
    assert {e.split()[0] for e in box.events} >= {"sleep", "wake"}, "the side not measured slept, and woke for its turn"
    first = document["where_time_went"][0]
    assert first["component"] == "queue" and first["upper"] < 0, "the wait for a slot is what the four slots remove"


def test_a_search_stopped_by_its_budget_says_so_and_how_many_samples_would_decide(pytester: pytest.Pytester) -> None:
    result, document = _ab(
        pytester,
        FakeBox(noise=0.05),
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


def test_a_sweeps_levels_are_measured_on_the_same_boots(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_sweep="""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.llamacpp(slots=4), reference=Server.llamacpp(slots=4), concurrency=[1, 4],
                           max_tokens=16)
        def test_ab(swarm):
            result = swarm.run()
            assert swarm.reference is not None and result.agents in (1, 4)
        """
    )
    box = FakeBox()
    result = _run(pytester, box)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*test_ab?c1?: pairing: co-located: *; levels test_ab[[]c1[]], test_ab[[]c4[]] measured on the same boots",
            "*test_ab?c4?: pairing: co-located: *; levels test_ab[[]c1[]], test_ab[[]c4[]] measured on the same boots",
        ]
    )
    c1, c4 = _documents(pytester)
    boots = []
    for document, agents in ((c1, 1), (c4, 4)):
        assert document["gate"]["verdict"] == "pass", document["gate"]
        for side in (document, document["reference"]):
            rounds = side["figures"]["rounds"]
            assert {r["requests"] for r in rounds} == {agents} and all(r["pair"] is not None for r in rounds)
        boots.append({r["boot"] for r in document["figures"]["rounds"]})
    assert boots[1] <= boots[0], "the second level booted nothing of its own"
    assert len(box.boots) == 2 * len(boots[0])


CANARIED = """
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server=Server.llamacpp(slots=4), canary=Server.llamacpp(slots=1), concurrency=4, max_tokens=32,
                   max_pairs=10)
def test_stored(swarm):
    swarm.run()
"""
CANARY = Server.llamacpp(slots=1)


def test_a_runner_slower_than_at_recording_is_not_a_regression_and_a_slower_server_is(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_stored=CANARIED)
    _run(pytester, FakeBox(noise=0.01, seed=1), "--swarm-update-baselines").assert_outcomes(passed=1)
    entry = yaml.safe_load((pytester.path / "baselines" / "testbox.yaml").read_text())["tests"][
        "test_stored.py::test_stored"
    ]
    assert set(entry["canary"]["figures"]) == {"effective_tps", "per_request_tps.median"}
    assert len(entry["figures"]["effective_tps"]["relative"]) == 5, "max_pairs=10: five boots of two pairs"

    _run(pytester, FakeBox(slowdown=1.5, noise=0.01, seed=2)).assert_outcomes(passed=1)  # the runner, not the server
    (document,) = _documents(pytester)
    gate = document["gate"]
    assert gate["verdict"] == "pass", json.dumps(gate, indent=1)
    drift = next(n for n in gate["notes"] if n.startswith("runner drift since the baseline was recorded"))
    found = re.search(r"effective_tps x([0-9.]+)", drift)
    assert found is not None, drift
    assert 0.6 < float(found.group(1)) < 0.7, f"the canary saw the runner a third slower: {drift}"
    assert any("figures gated relative to the canary's" in n for n in gate["notes"])

    slower = _run(pytester, FakeBox({FOUR: 70.0, CANARY: 100.0}, noise=0.01, seed=3))  # the server, not the runner
    slower.assert_outcomes(failed=1)
    slower.stdout.fnmatch_lines(["*test_stored.py::test_stored: swarm gate FAIL"])


CAPACITY = """
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server=Server.llamacpp(slots=2), reference=Server.llamacpp(slots=4), capacity={"concurrency": (2, 4)},
                   max_tokens=64, interactive={"ttft.p95": "< 1.0"})
def test_capacity(swarm):
    swarm.run()
"""


def test_a_server_with_half_the_slots_fails_on_capacity_against_the_full_one(pytester: pytest.Pytester) -> None:
    """At 50 tokens a second a queued request waits 1.3 s for its first token: past two slots, three agents break
    TTFT p95 < 1 s on the candidate and none of four on the reference."""
    pytester.makepyfile(test_capacity=CAPACITY)
    result = _run(pytester, FakeBox({Server.llamacpp(slots=2): 50.0, FOUR: 50.0}))
    result.assert_outcomes(failed=1)
    (document,) = _documents(pytester)
    candidate, reference = document["capacity"], document["reference"]["capacity"]
    assert reference["capacity"] == 4 and not reference["bounded"], reference
    assert candidate["capacity"] == 2 and candidate["bounded"], candidate
    steps = [(s["level"], s["verdict"]) for s in candidate["steps"] if s["verdict"] != "inconclusive"]
    assert (3.0, "fail") in steps and (2.0, "pass") in steps
    (claim,) = document["gate"]["comparisons"]
    assert claim["figure"] == "capacity" and claim["verdict"] == "fail"
    result.stdout.fnmatch_lines(
        [
            "*capacity: carries 2, reference 4; within 5% needs 4 (held at 2, shown not to hold at 3): FAIL",
            "*test_capacity candidate: capacity 2 agents, where ttft.p95 < 1",
            "*concurrency  verdict*rounds  requests  failed*ttft.p95",
            "*test_capacity reference: capacity 4 agents (at least: the range ends at 4), where ttft.p95 < 1",
        ]
    )
    assert document["agents"] == 2, "the item's figures are those of its capacity level"


def test_a_workers_search_converges_and_fails_against_a_baseline_it_no_longer_carries(
    pytester: pytest.Pytester,
) -> None:
    """One server a worker sharing two cores: past two workers each decodes at 2/N of its speed alone, so the search
    stops at 2 where the condition asks for 0.7 of it; a stored capacity of 8 is not carried."""
    pytester.makepyfile(
        test_workers="""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.llamacpp(slots=1, threads=1), mode="process", capacity={"workers": (1, 4)},
                           concurrency=1, max_tokens=32, interactive={"per_request_tps.median": "> 70"})
        def test_workers(swarm):
            swarm.run()
        """
    )
    baselines.update(
        pytester.path / "baselines" / "testbox.yaml",
        "testbox",
        {},
        {},
        {"test_workers.py::test_workers": Entry({"capacity": FigureBaseline("higher", (8.0,), per_boot=False)})},
    )
    result = _run(pytester, FakeBox(cores=2))
    result.assert_outcomes(failed=1)
    (document,) = _documents(pytester)
    found = document["capacity"]
    assert found["what"] == "workers" and found["ended"] is None, "converged within its budget"
    assert found["capacity"] == 2 and found["bounded"], found
    assert [s["level"] for s in found["steps"]][:2] == [1.0, 2.0], "grows geometrically from the range's low end"
    (claim,) = document["gate"]["comparisons"]
    assert claim["verdict"] == "fail" and claim["baseline"] == 8
    result.stdout.fnmatch_lines(
        [
            "*capacity: carries *, baseline 8*FAIL",
            "*test_workers: capacity 2 workers, where per_request_tps.median > 70",
        ]
    )


def test_the_plugin_module_measures_every_item_on_the_default_box(pytester: pytest.Pytester) -> None:
    """`-p pytest_swarm.testing`: no box named anywhere, every spec served at the default speed, nothing booted."""
    pytester.makepyfile(
        test_ab=AB.format(server="Server.llamacpp(slots=4)", reference=FOUR_TEXT, extra=", max_tokens=8")
    )
    result = pytester.runpytest(HW, "-p", "pytest_swarm.testing", "-p", "no:cacheprovider", "--swarm-json=out.json")
    result.assert_outcomes(passed=1)
    (document,) = _documents(pytester)
    assert document["server"]["engine_version"] == "fake box (llamacpp)"
    assert document["figures"]["per_request_tps"]["p50"] == pytest.approx(DEFAULT_SPEED, rel=0.1)


def test_a_conftest_declares_the_box_its_suite_measures_on(pytester: pytest.Pytester) -> None:
    """A conftest's own pytest_swarm_machine: its box's declared speed is what the items measure."""
    pytester.makeconftest(
        """
        from pytest_swarm import Server
        from pytest_swarm.testing import FakeBox

        def pytest_swarm_machine(config):
            return FakeBox({Server.llamacpp(slots=4): 40.0})
        """
    )
    pytester.makepyfile(
        test_ab=AB.format(server="Server.llamacpp(slots=4)", reference=FOUR_TEXT, extra=", max_tokens=8")
    )
    pytester.runpytest(HW, "-p", "no:cacheprovider", "--swarm-json=out.json").assert_outcomes(passed=1)
    (document,) = _documents(pytester)
    assert document["figures"]["per_request_tps"]["p50"] == pytest.approx(40.0, rel=0.1)


def test_process_workers_each_get_their_own_server_and_row_and_the_interactive_count(pytester: pytest.Pytester) -> None:
    """mode="process" at workers=[1, 2]: a server a worker, a row a worker, and the largest count still interactive
    (the daemons' own memory is the e2e tier's: tests/test_process_mode.py)."""
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
    box = FakeBox()
    result = _run(pytester, box)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "test_workers[[]w2[]]: 2 workers, interactive=True (ttft.p95 < 30, per_request_tps.median > 1)",
            "  worker 0: 2/2 ok, tok/s median * min *, TTFT p95 * s",
            "  worker 1: 2/2 ok, tok/s median * min *, TTFT p95 * s",
            "test_workers.py::test_workers: max_interactive_workers = 2",
        ]
    )
    assert [count for _spec, count in box.boots] == [1, 2], "a server a worker, booted for each level"
    w1, w2 = _documents(pytester)
    assert w2["max_interactive_workers"] == 2
    assert w2["figures"]["workers"] == 2 and [w["worker"] for w in w2["figures"]["per_worker"]] == [0, 1]
    assert w1["figures"]["workers"] == 1


def test_a_trace_request_beyond_the_servers_context_is_refused_before_any_round(pytester: pytest.Pytester) -> None:
    """The server says at boot that a request's prompt and answer share 1024 tokens; the trace's line 2 asks 3000 + 16:
    no round is played, and the failure names the line and the fit that would serve it."""
    lines = [
        {"timestamp": 0, "input_length": 100, "output_length": 8, "hash_ids": [0]},
        {"timestamp": 50, "input_length": 3000, "output_length": 16, "hash_ids": [0, 1, 2, 3, 4, 5]},
    ]
    (pytester.path / "big.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    pytester.makepyfile(
        test_oversized="""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.llamacpp(ctx=1024), trace="big.jsonl", rounds=1)
        def test_oversized(swarm):
            swarm.run()
        """
    )
    box = FakeBox(context_tokens=1024)
    result = _run(pytester, box)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*refused before the round: 1 of 2 requests of *big.jsonl cannot fit llamacpp* context of 1024 tokens a "
            "request (what the server said at boot), with ~16 of template: *big.jsonl:2: input 3000 + output 16 "
            "tokens. The longest needs 3016: fit the trace with trace_max_input=*",
        ]
    )
    assert not [event for event in box.events if event.startswith("round")], "no request was sent"


OPEN = """
import pytest
from pytest_swarm import Server

TWO = Server.llamacpp(slots=2)

@pytest.mark.swarm(server=TWO, rate=4, requests=6, arrival="poisson", max_tokens=8, rounds=1,
                   goodput={"ttft": "< 30", "tpot": "< 5"})
def test_open(swarm):
    swarm.run()

@pytest.mark.swarm(server=TWO, rate=4, requests=6, max_tokens=8, rounds=1, goodput={"ttft": "< 0.000001"},
                   slo={"goodput_share": ">= 0.5"})
def test_out_of_goodput(swarm):
    swarm.run()

@pytest.mark.swarm(server=Server.llamacpp(slots=1), rate=40, requests=8, max_tokens=8, rounds=1)
def test_queued(swarm):
    swarm.run()
"""


def test_an_open_loop_keeps_its_schedule_counts_its_goodput_and_fails_a_goodput_share_below_its_slo(
    pytester: pytest.Pytester,
) -> None:
    """Six arrivals at 4 a second on two slots: each sent on its instant, every one within its goodput limits. The same
    arrivals judged against a first token in a microsecond: none counts, and the item FAILs on its SLO. Forty a second
    on one slot serving one in 0.13 s: the arrivals wait their turn, their first token later and later."""
    pytester.makepyfile(test_open=OPEN)
    result = _run(pytester, FakeBox())
    result.assert_outcomes(passed=2, failed=1)
    items = {d["nodeid"].rsplit("::", 1)[-1]: d["figures"] for d in _documents(pytester)}
    kept = items["test_open"]
    assert kept["requests"] == 6 and kept["failures"] == 0 and kept["send_lateness"]["n"] == 6
    assert kept["send_lateness"]["max"] == 0.0 and kept["achieved_rate"] > 0
    assert kept["goodput_share"] == 1.0 and kept["goodput"] > 0 and kept["tpot"]["n"] == 6
    assert items["test_out_of_goodput"]["goodput_share"] == 0.0
    result.stdout.fnmatch_lines(["*hard limit broken: goodput_share = 0, limit >= 0.5*"])
    queued = items["test_queued"]
    assert queued["ttft"]["max"] > 5 * queued["ttft"]["min"], queued["ttft"]
    assert "test_open: open loop 4/s poisson" in result.stdout.str()


def test_an_open_loop_whose_sends_fall_behind_fails_naming_the_load_generator(pytester: pytest.Pytester) -> None:
    """The box's generator sends every request 50 ms after its instant, past the 10 ms an open loop allows by default:
    the round did not happen as asked, and the item says so with the lateness it measured."""
    pytester.makepyfile(
        test_late="""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.llamacpp(slots=2), rate=4, requests=6, max_tokens=8, rounds=1)
        def test_late(swarm):
            swarm.run()
        """
    )
    result = _run(pytester, FakeBox(send_late_s=0.05))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*the load generator did not keep the schedule (round 1: send lateness p99 50.0 ms, at least 50.0 ms at 99% "
            "confidence, > 10 ms*"
        ]
    )
    (late,) = _documents(pytester)
    assert late["figures"]["send_lateness"]["p50"] == pytest.approx(0.05)


def test_a_server_that_opens_fewer_slots_than_asked_and_does_not_say_so_fails_on_what_was_measured(
    pytester: pytest.Pytester,
) -> None:
    """Two slots asked, one opened, and the server never says so (an Ollama that falls back to one slot with no load
    line in its log): the requests' own token times show one decoding at a time, and the item fails saying so."""
    pytester.makepyfile(
        test_fallback="""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.ollama("gemma3-270m", num_parallel=2), concurrency=2, max_tokens=12, rounds=1)
        def test_fallback(swarm):
            swarm.run()
        """
    )
    box = FakeBox(faults={Server.ollama("gemma3-270m", num_parallel=2): Faults(slots_opened=1)})
    result = _run(pytester, box)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*at most 1 request(s) decoded at the same time with 2 agents against 2 slots*slots checked by: measured*"]
    )
    (document,) = _documents(pytester)
    assert document["figures"]["peak_streams"] == 1 and document["server"]["slots_check"] == "measured"


def test_workers_whose_server_fails_to_boot_fail_the_item_with_its_words_and_measure_nothing(
    pytester: pytest.Pytester,
) -> None:
    """mode="process": the boot's own error is the item's failure, at every level, and no round is played."""
    pytester.makepyfile(
        test_boot="""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.llamacpp(extra_args=["--bogus"]), mode="process", workers=[1, 3], max_tokens=4)
        def test_boot(swarm):
            swarm.run()
        """
    )
    broken = Server.llamacpp(extra_args=["--bogus"])
    box = FakeBox(faults={broken: Faults(boot_error="server died before it was ready (exit status 2)")})
    result = _run(pytester, box)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*fake box: llamacpp* server died before it was ready (exit status 2)*"])
    assert not [event for event in box.events if event.startswith("round")], "no request was sent"


def test_a_run_interrupted_mid_round_keeps_what_it_measured_and_says_it_is_incomplete(
    pytester: pytest.Pytester,
) -> None:
    """Ctrl-C (or SIGTERM, which the plugin raises as the same) in the third round of a sweep's first level: pytest
    exits interrupted, the JSON keeps the two rounds played and says the run and the item are incomplete, and the
    second level never starts."""
    pytester.makepyfile(
        test_long="""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.llamacpp(slots=2), concurrency=[1, 2], max_tokens=8, rounds=5, warmup=False)
        def test_long(swarm):
            swarm.run()
        """
    )
    box = FakeBox(faults={Server.llamacpp(slots=2): Faults(interrupt_at_round=3)})
    result = pytester.runpytest(
        HW, "-p", "no:cacheprovider", "--swarm-json=out.json", plugins=[box], no_reraise_ctrlc=True
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    document = json.loads((pytester.path / "out.json").read_text())
    assert document["complete"] is False
    (test,) = document["tests"]
    assert test["incomplete"] is True and test["nodeid"] == "test_long.py::test_long[c1]"
    assert test["figures"]["aborted"] == "interrupted: partial results"
    assert len(test["figures"]["rounds"]) == 2 and test["figures"]["requests"] == 2
    assert box.events.count("round llamacpp:gemma3-270m x2") == 3


def test_a_round_the_guard_aborts_fails_the_item_keeps_its_results_and_ends_the_rounds(
    pytester: pytest.Pytester,
) -> None:
    """The memory guard trips in the second of three rounds: that round's cancelled requests count as failures with
    their cause, no round follows it, and the item fails naming the guard (its tripping on the host's real memory
    is the e2e tier's: tests/test_process_mode.py)."""
    pytester.makepyfile(
        test_guard="""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.llamacpp(slots=2), concurrency=2, max_tokens=8, rounds=3, warmup=False)
        def test_guard(swarm):
            swarm.run()
        """
    )
    box = FakeBox(faults={Server.llamacpp(slots=2): Faults(guard_at_round=2)})
    result = _run(pytester, box)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*hard limit broken: round aborted by the guard: fake box: host available memory fell below the limit*"]
    )
    (document,) = _documents(pytester)
    figures = document["figures"]
    assert len(figures["rounds"]) == 2 and box.events.count("round llamacpp:gemma3-270m x2") == 2
    assert figures["requests"] == 4 and figures["failures"] == 1
    assert figures["failure_causes"] == {"cancelled: the round was aborted": 1}
    assert figures["aborted"].startswith("round aborted by the guard")


SESSIONS = """
import pytest
from pytest_swarm import Server

SESSIONS = dict(concurrency=2, turns=3, system_prompt=64, max_tokens=8, rounds=1)

@pytest.mark.swarm(server=Server.llamacpp(slots=2), cache="warm", **SESSIONS)
def test_warm(swarm):
    result = swarm.run()
    assert [t.turn for t in result.facets.per_turn] == [1, 2, 3]

@pytest.mark.swarm(server=Server.llamacpp(slots=2, extra_args=["--no-cache-prompt"]), cache="warm", **SESSIONS)
def test_warm_without_cache(swarm):
    swarm.run()
"""


def test_sessions_are_counted_turn_by_turn_and_a_warm_workload_on_a_server_that_reuses_nothing_fails(
    pytester: pytest.Pytester,
) -> None:
    """Two agents, each a session of three turns: per turn, the prompt grows by the earlier turns' prompts and
    answers, which a warm cache serves; the server whose prefix cache is off serves none of it, and the item fails
    saying so, turn by turn."""
    pytester.makepyfile(test_sessions=SESSIONS)
    box = FakeBox(faults={Server.llamacpp(slots=2, extra_args=["--no-cache-prompt"]): Faults(cache_off=True)})
    result = _run(pytester, box)
    result.assert_outcomes(passed=1, failed=1)
    items = {d["nodeid"].rsplit("::", 1)[-1]: d["figures"] for d in _documents(pytester)}
    warm = items["test_warm"]
    assert [(t["turn"], t["requests"]) for t in warm["per_turn"]] == [(1, 2), (2, 2), (3, 2)]
    assert [t["cached_prompt_tokens"] for t in warm["per_turn"]] == [0, 40, 80], "each earlier turn's 32 + 8 tokens"
    assert [t["cacheable_tokens"] for t in warm["per_turn"]] == [None, 40, 80]
    assert warm["sessions"]["sessions"] == 2 and warm["sessions"]["output_tokens"]["p50"] == 24
    assert [t["cached_prompt_tokens"] for t in items["test_warm_without_cache"]["per_turn"]] == [0, 0, 0]
    result.stdout.fnmatch_lines(
        [
            "*cache='warm', but the server reused 0% of what earlier turns made cacheable (mean cached of cacheable "
            "prompt tokens per request: turn 2: 0 of 40, turn 3: 0 of 80; at least *% expected)*",
            "test_warm: 2 sessions of 3 turns, cache=warm",
        ]
    )


TRACE = f"""
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server=Server.llamacpp(slots=2), trace={str(EXAMPLES / "traces" / "agents_small.jsonl")!r},
                   trace_block=64, trace_scale=0.5, rounds=1)
def test_trace(swarm):
    swarm.run()
"""


def test_a_trace_is_replayed_at_its_own_times_and_lengths_and_its_shared_blocks_are_what_the_cache_serves(
    pytester: pytest.Pytester,
) -> None:
    """The trace's twelve requests, each sent at half its recorded offset with the answer length it recorded; the
    prompt blocks a request shares with earlier ones (by hash id, 64 tokens a block) come from the cache. That a real
    prefix cache serves them is the e2e tier's (tests/test_agent_workloads.py, the Mooncake window)."""
    trace = load_trace(EXAMPLES / "traces" / "agents_small.jsonl", scale=0.5, block=64)
    pytester.makepyfile(test_trace=TRACE)
    result = _run(pytester, FakeBox())
    result.assert_outcomes(passed=1)
    (document,) = _documents(pytester)
    figures = document["figures"]
    assert figures["requests"] == len(trace.requests) == 12 and figures["failures"] == 0
    assert figures["output_tokens"] == sum(r.output_length for r in trace.requests)
    assert figures["cached_prompt_tokens"] == sum(shared_tokens(trace)) > 0
    assert figures["send_lateness"]["n"] == 12 and figures["send_lateness"]["max"] == 0.0
    assert "test_trace: open loop trace x0.5" in result.stdout.str()


ENDPOINTS = """
import pytest
from pytest_swarm import Server

CANARY = Server.endpoint("http://127.0.0.1:9/v1", model="m", name="canary-deploy")
PROD = Server.endpoint("http://127.0.0.1:9", model="m", name="prod")

@pytest.mark.swarm(server=CANARY, reference=PROD, concurrency=2, max_tokens=16)
def test_canary_deploy_against_prod(swarm):
    swarm.run()

@pytest.mark.swarm(server=PROD, concurrency=2, max_tokens=16, rounds=3)
def test_prod(swarm):
    swarm.run()
"""


def test_running_servers_are_compared_where_they_run_and_a_named_ones_baselines_are_its_own(
    pytester: pytest.Pytester,
) -> None:
    """Two deployments someone else runs: the slower one FAILs against the other, the verdict saying that nothing was
    restarted. A named endpoint's stored baseline is filed under its name, not the client machine's profile, and no
    canary plays beside it (one on this machine would measure this machine)."""
    canary_deploy = Server.endpoint("http://127.0.0.1:9/v1", model="m", name="canary-deploy")
    prod = Server.endpoint("http://127.0.0.1:9", model="m", name="prod")
    assert canary_deploy.url == prod.url == "http://127.0.0.1:9" and canary_deploy.label == "canary-deploy"
    pytester.makepyfile(test_endpoints=ENDPOINTS)
    box = FakeBox({canary_deploy: 70.0, prod: 100.0})
    result = _run(pytester, box, "--swarm-update-baselines")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*canary-deploy, prod: running already, never started, stopped or restarted; a boot of such a server is a new "
         "connection to the same process*"]
    )  # fmt: skip
    assert (pytester.path / "baselines" / "prod.yaml").exists()
    assert not (pytester.path / "baselines" / "testbox.yaml").exists()
    filed = baselines.load(pytester.path / "baselines" / "prod.yaml")
    assert filed is not None and list(filed.tests) == ["test_endpoints.py::test_prod"]
    assert filed.fingerprint == {"endpoint": "http://127.0.0.1:9"}
    assert not [e for e in box.events if e.startswith("prepared llamacpp")], "no canary booted beside an endpoint"
    again = _run(pytester, FakeBox({prod: 100.0}), "-k", "test_prod")
    again.assert_outcomes(passed=1)
    (document,) = _documents(pytester)
    gate = document["gate"]
    assert gate["against"] == "baseline" and gate["comparisons"] and gate["verdict"] != "fail", gate
    assert "no baseline" not in again.stdout.str(), "the entry was found in prod.yaml"


def test_a_named_swarm_endpoint_files_its_baselines_under_its_name(pytester: pytest.Pytester) -> None:
    """`--swarm-endpoint` with `--swarm-endpoint-name staging`: the item's stored baseline is the server's, filed under
    its name wherever the client runs, and the reports call the server by it."""
    pytester.makepyfile(
        test_any="""
        import pytest

        @pytest.mark.swarm(concurrency=2, max_tokens=16, rounds=3)
        def test_staging(swarm):
            swarm.run()
        """
    )
    endpoint = ("--swarm-endpoint=http://127.0.0.1:9/v1", "--swarm-model=m", "--swarm-endpoint-name=staging")
    result = _run(pytester, FakeBox(), *endpoint, "--swarm-update-baselines")
    result.assert_outcomes(passed=1)
    filed = baselines.load(pytester.path / "baselines" / "staging.yaml")
    assert filed is not None and list(filed.tests) == ["test_any.py::test_staging"]
    assert filed.fingerprint == {"endpoint": "http://127.0.0.1:9"}
    assert not (pytester.path / "baselines" / "testbox.yaml").exists()
    result.stdout.fnmatch_lines(["swarm baselines updated in */baselines/staging.yaml"])
    (document,) = _documents(pytester)
    assert document["server"]["name"] == "staging", document["server"]
    bad = _run(pytester, FakeBox(), *endpoint[:2], "--swarm-endpoint-name=../prod")
    assert bad.ret != 0
    bad.stderr.fnmatch_lines(["*name must be usable as a baseline file's name*'../prod'*"])
