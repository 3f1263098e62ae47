"""The split of an A/B's change into its components (gate/where.py) and the line that says it (report/where_line.py)."""

from __future__ import annotations

import math
import random
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm import Server
from pytest_swarm.figures.components import NO_CLOCK, RoundClock, RoundSplit
from pytest_swarm.figures.summary import RoundFigures
from pytest_swarm.gate.capacity import CapacityFound, Step
from pytest_swarm.gate.entries import WhereBaseline
from pytest_swarm.gate.notes import NoValue
from pytest_swarm.gate.samples import samples
from pytest_swarm.gate.statistics import Verdict
from pytest_swarm.gate.verdict import baseline_entry, evaluate, evaluate_ab
from pytest_swarm.gate.where import (
    NOT_RECORDED,
    ComponentChange,
    NoSplit,
    PairClocks,
    StateChange,
    WhereTimeWent,
    pair_clocks,
    recorded_where,
    split_capacities,
    split_stored,
    split_stored_capacity,
    welch_interval,
    where_time_went,
)
from pytest_swarm.marker.parse import parse_marker
from pytest_swarm.report.json_report import where_document
from pytest_swarm.report.notes import note_text
from pytest_swarm.report.verdict import verdict_message
from pytest_swarm.report.where_line import seconds, where_line
from pytest_swarm.results.item import Paired
from pytest_swarm.settings import GateSettings
from pytest_swarm.specs import Criteria
from tests.factories import clocked_side, item_result

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import where_naming  # the benchmark's simulation, run smaller here


def _clock(queue: float, prefill: float, decode: float, client: float, **state: float) -> RoundClock:
    means = (("queue", queue), ("prefill", prefill), ("decode", decode), ("client", client))
    return RoundClock(RoundSplit("per request", means, queue + prefill + decode + client, 8), state)


def _ab(shift: dict[str, float], n: int = 10, seed: int = 0, noise: float = 0.01) -> list[list[PairClocks]]:
    """N samples of one pair each; the candidate is the reference plus `shift`, both with their own noise."""
    rng = random.Random(seed)

    def side(extra: dict[str, float], waiting: float) -> RoundClock:
        parts = {k: max(0.0, v + extra.get(k, 0.0) + rng.gauss(0, noise)) for k, v in BASE.items()}
        return _clock(**parts, waiting_peak=waiting)

    return [[([side(shift, 2.0 if "queue" in shift else 0.0)], [side({}, 0.0)])] for _ in range(n)]


BASE = {"queue": 0.05, "prefill": 0.1, "decode": 0.5, "client": 0.01}


def test_a_slower_queue_comes_first_with_its_share_and_the_state_that_moved_with_it() -> None:
    where = where_time_went(_ab({"queue": 0.38, "decode": 0.09}))
    assert [c.component for c in where.moved] == ["queue", "decode"]
    queue = where.moved[0]
    assert queue.change_s == pytest.approx(0.38, abs=0.02) and queue.share == pytest.approx(0.81, abs=0.05)
    assert queue.lower > 0 and where.span is not None and where.span.change_s == pytest.approx(0.47, abs=0.03)
    line = where_line(where)
    assert line == "where the time went: queue +0.38 s (81%), decode +88 ms (19%); waiting peak 0 -> 2"  # seed 0
    entry = where.to_json()[0]
    assert list(entry) == ["component", "reference_s", "candidate_s", "change_s", "share", "lower", "upper"]
    assert entry["component"] == "queue"


def test_components_moving_opposite_ways_share_the_movement_and_the_line_gives_the_net_change() -> None:
    """One slot against four: the wait grows and each request, alone in the server, decodes faster. Each share is of
    the components' whole movement (never past 100% or below 0), and the span's net change follows them."""
    where = where_time_went(_ab({"queue": 0.4, "decode": -0.3}))
    queue, decode = where.moved[:2]
    assert (queue.component, decode.component) == ("queue", "decode")
    assert queue.share is not None and decode.share is not None and 0 < decode.share < queue.share < 1
    assert sum(c.share or 0.0 for c in where.changes) == pytest.approx(1.0)
    line = where_line(where)
    assert line.startswith("where the time went: queue +0.40 s (5") and "decode -0.30 s (4" in line, line
    assert "; end to end +0.1" in line and line.split("; ")[1].endswith(" net"), line
    same_way = where_line(where_time_went(_ab({"queue": 0.38, "decode": 0.09})))
    assert " net" not in same_way, "all one way: the shares are of the span's change already"


@pytest.mark.parametrize("seed", range(10))
def test_an_unchanged_ab_names_no_component_and_no_cause(seed: int) -> None:
    where = where_time_went(_ab({}, seed=seed))
    assert where.moved == ()
    line = where_line(where)
    assert line.startswith("where the time went: no component moved beyond its interval (end to end ")
    assert "waiting" not in line


def test_unchanged_abs_with_the_measured_noise_name_a_component_in_at_most_one_percent() -> None:
    """600 seeded unchanged A/Bs with the noise the real runs measured on every component (the benchmark's simulation;
    benchmarks/where_naming_results.txt has 5,000): the rate of any naming stays within three standard errors of 1%,
    and a cause of +20% of the request is named first in at least 95% of 200."""
    rng = random.Random(3)
    n = 600
    named = sum(1 for _ in range(n) if where_time_went(where_naming.simulated_ab(rng, 8, None, 0.0)).moved)
    assert named / n <= 0.01 + 3 * math.sqrt(0.01 * 0.99 / n), named
    first = 0
    for _ in range(200):
        moved = where_time_went(where_naming.simulated_ab(rng, 8, "decode", 0.2)).moved
        first += bool(moved) and moved[0].component == "decode"
    assert first >= 190, first


@given(st.dictionaries(st.sampled_from(list(BASE)), st.floats(-0.04, 0.5), min_size=1), st.integers(0, 10**6))
def test_the_components_changes_add_up_to_the_spans_change(shift: dict[str, float], seed: int) -> None:
    where = where_time_went(_ab(shift, n=6, seed=seed))
    assert where.span is not None
    assert sum(c.change_s for c in where.changes) == pytest.approx(where.span.change_s, abs=1e-9)
    assert [abs(c.change_s) for c in where.changes] == sorted((abs(c.change_s) for c in where.changes), reverse=True)


def test_too_few_samples_name_nothing_and_say_why() -> None:
    where = where_time_went(_ab({"queue": 0.4}, n=1))
    assert where.moved == () and where_line(where) == "where the time went: 1 sample, too few for an interval"


def test_no_clock_unread_and_client_bound_rounds_are_said_in_the_line() -> None:
    none = where_time_went([[([RoundClock(NO_CLOCK)], [RoundClock(NO_CLOCK)])]])
    assert where_line(none).startswith("where the time went: server clock: none")
    unread = "the server's clock could not be read: GET http://x/metrics took longer than 1 s"
    hung = where_time_went([[([RoundClock(NO_CLOCK, unread=unread)], [RoundClock(NO_CLOCK, unread=unread)])]])
    assert where_line(hung) == "where the time went: " + unread
    pairs = _ab({"client": 0.2})
    bound = [[([RoundClock(c.split, c.state, client_bound=True) for c in cand], ref) for cand, ref in s] for s in pairs]
    line = where_line(where_time_went(bound))
    assert line.startswith("where the time went: client +0.2") and "the client was the bottleneck in 10 of 10" in line


def test_contradicting_requests_are_counted_and_named() -> None:
    bad = RoundSplit("per request", BASE_MEANS, 0.66, 7, 1, "the server's prefill (0.520 s) is longer than ...")
    pairs = [[([RoundClock(bad)], [_clock(**BASE)])] for _ in range(6)]
    line = where_line(where_time_went(pairs))
    assert "; 6 requests' server timings contradict the client's, left out (the server's prefill" in line


BASE_MEANS = tuple(BASE.items())


def test_the_gates_own_pairs_feed_the_split() -> None:
    def figures(boot: int, pair: int) -> RoundFigures:
        return RoundFigures(
            wall_s=1.0, effective_tps=1.0, requests=1, failures=0, output_tokens=1, boot=boot, pair=pair
        )

    cand = [figures(b, p) for b in range(6) for p in (2 * b, 2 * b + 1)]
    ref = [figures(b, p) for b in range(6) for p in (2 * b, 2 * b + 1)]
    clocks = {id(r): _clock(0.3 + 0.001 * r.pair, 0.1, 0.5, 0.01) for r in cand} | {  # type: ignore[operator]
        id(r): _clock(0.05, 0.1, 0.5, 0.01 + 0.0001 * (r.pair or 0)) for r in ref
    }
    where = where_time_went(pair_clocks(samples(cand, ref), lambda r: clocks.get(id(r))))
    assert where.samples == 6 and where.moved[0].component == "queue"


@given(st.floats(-100.0, 100.0).filter(lambda x: x != 0.0))
def test_a_duration_is_never_rounded_to_a_zero_it_is_not(value: float) -> None:
    shown = seconds(value)
    digits = shown.split()[0].lstrip("+-").replace(".", "")
    assert digits.strip("0"), shown


def test_an_ab_verdict_carries_its_split_first_in_its_message_and_in_its_json() -> None:
    config = parse_marker((), {"server": Server.llamacpp(slots=1), "reference": Server.llamacpp(slots=4)})
    candidate, reference = clocked_side(0.3, 1), clocked_side(0.0, 2)
    assert candidate.facets.where.distribution("queue_time").p50 == pytest.approx(
        0.305, abs=0.006
    )  # the registry's figure
    outcome = evaluate_ab(candidate, reference, config.criteria, GateSettings())
    assert isinstance(outcome.where, WhereTimeWent)
    assert outcome.where.moved[0].component == "queue" and outcome.where.source == "per request"
    ttft = outcome.where_ttft  # the time to the first token split the same way: no decode in it
    assert ttft is not None and ttft.upto == "first token" and ttft.moved[0].component == "queue"
    assert {c.component for c in ttft.changes} == {"queue", "prefill", "client"}
    item = replace(item_result("t.py::t", "t.py::t", config, candidate, outcome), kind=Paired(None, canary=False))
    message = verdict_message(item).splitlines()
    assert message[0].startswith("throughput x"), "the gated throughput failed: its factors lead"
    assert message[1].startswith("where the time went: queue +0.3"), message
    assert message[2].startswith("t.py::t: swarm gate ")
    document = where_document(outcome.where)
    listed = document["where_time_went"]
    assert listed[0]["component"] == "queue" and set(listed[0]) == {
        "component",
        "reference_s",
        "candidate_s",
        "change_s",
        "share",
        "lower",
        "upper",
    }
    assert abs(listed[0]["change_s"]) >= max(abs(c["change_s"]) for c in listed), "largest |change| first"
    same = evaluate_ab(clocked_side(0.0, 3), reference, config.criteria, GateSettings())
    assert isinstance(same.where, WhereTimeWent) and not same.where.moved
    assert where_line(same.where).startswith("where the time went: no component moved beyond its interval")


def test_a_comparison_without_pairs_says_why_it_has_no_split() -> None:
    config = parse_marker((), {"server": Server.llamacpp(slots=1), "reference": Server.llamacpp(slots=4)})
    never = evaluate_ab(clocked_side(0.0, 1), None, config.criteria, GateSettings())
    assert isinstance(never.where, NoSplit) and "reference never ran" in never.where.reason
    stored = parse_marker((), {"server": Server.llamacpp(slots=1)})
    old = replace(baseline_entry(clocked_side(0.0, 1), stored.criteria, {}, {}), where=None)
    outcome = evaluate(clocked_side(0.0, 2), stored.criteria, old, GateSettings())
    assert outcome.where is NOT_RECORDED and outcome.where_ttft is None
    assert where_document(outcome.where) == {
        "where_time_went": None,
        "where": {
            "line": f"where the time went: not split: {NOT_RECORDED.reason}",
            "reason": NOT_RECORDED.reason,
        },
    }
    assert evaluate(clocked_side(0.0, 2), stored.criteria, None, GateSettings()).where is None, (
        "recording compares nothing"
    )


def test_a_stored_baseline_splits_its_change_unpaired_against_the_recording_and_an_unchanged_run_names_nothing() -> (
    None
):
    stored = parse_marker((), {"server": Server.vllm("m", max_num_seqs=4)})
    entry = baseline_entry(clocked_side(0.0, 1), stored.criteria, {}, {})
    assert entry.where is not None and entry.where.per_boot and len(entry.where.end["span"]) == 4
    slower = evaluate(clocked_side(0.3, 2), stored.criteria, entry, GateSettings())
    assert isinstance(slower.where, WhereTimeWent) and slower.where.moved[0].component == "queue"
    assert slower.where.moved[0].change_s == pytest.approx(0.3, abs=0.01)
    line = where_line(slower.where)
    assert line.startswith("where the time went: queue +0.30 s (")
    assert line.endswith("; this run's 4 boots against the recording's 4 boots, unpaired (Welch)")
    assert slower.where.sides == ("recorded", "this run")
    assert slower.where_ttft is not None and slower.where_ttft.moved[0].component == "queue"
    same = evaluate(clocked_side(0.0, 3), stored.criteria, entry, GateSettings())
    assert isinstance(same.where, WhereTimeWent) and same.where.moved == ()


def test_welchs_interval_holds_the_difference_and_floors_a_steady_side() -> None:
    lower, upper = welch_interval([1.0, 1.1, 0.9, 1.0], [0.5, 0.6, 0.4, 0.5], 0.005)
    assert lower < 0.5 < upper and lower > 0
    assert welch_interval([1.0], [0.5, 0.6], 0.005) == (-math.inf, math.inf)
    steady = welch_interval([1.0, 1.0, 1.0], [1.01, 1.01, 1.01], 0.005)
    assert steady == pytest.approx((-0.01, -0.01)), "no spread and no floor: the difference itself"
    floored = welch_interval([1.0, 1.0, 1.0], [1.01, 1.01, 1.01], 0.005, floor=0.03)
    assert floored[0] < 0 < floored[1], "one boot's rounds floored at the gate's cv: 1% is inside its noise"


def _found(levels: dict[float, tuple[Verdict, float]], what: str = "concurrency") -> CapacityFound:
    """A search whose steps at each level hold 6 rounds of a vLLM clock with `queue` seconds of wait."""
    rng = random.Random(len(levels))
    steps = tuple(
        Step(
            level,
            verdict,
            6,
            clocks=tuple(_clock(queue + rng.uniform(0, 0.01), 0.1, 0.5, 0.004) for _ in range(6)),
            clocks_ttft=tuple(_clock(queue, 0.1, 0.0, 0.004) for _ in range(6)),
        )
        for level, (verdict, queue) in levels.items()
    )
    return CapacityFound(what, 1, 8, steps)


def test_a_capacity_ab_splits_at_the_references_capacity_where_the_candidate_broke() -> None:
    candidate = _found({1: (Verdict.PASS, 0.0), 2: (Verdict.PASS, 0.05), 4: (Verdict.FAIL, 0.6)})
    reference = _found({1: (Verdict.PASS, 0.0), 2: (Verdict.PASS, 0.0), 4: (Verdict.PASS, 0.02), 8: (Verdict.FAIL, 1)})
    where = split_capacities(candidate, reference)
    assert isinstance(where, WhereTimeWent) and where.moved[0].component == "queue"
    assert where.unpaired == "each side's rounds at concurrency 4, unpaired (Welch)"
    assert where.moved[0].change_s == pytest.approx(0.58, abs=0.02)
    apart = split_capacities(_found({1: (Verdict.PASS, 0.0)}), _found({2: (Verdict.PASS, 0.0)}))
    assert isinstance(apart, NoSplit) and "no concurrency in common" in apart.reason


def test_a_stored_capacity_splits_at_its_recorded_level_or_says_it_was_not_measured_there() -> None:
    recorded = _found({2: (Verdict.PASS, 0.0), 4: (Verdict.PASS, 0.01)})
    entry = recorded_where([], 4.0)
    assert entry is None, "no rounds, nothing kept"
    kept = WhereBaseline(
        "per request",
        False,
        {
            "span": tuple(0.604 + 0.01 * (i % 2) for i in range(6)),
            "queue": tuple(0.01 * (i % 2) for i in range(6)),
            "prefill": (0.1,) * 6,
            "decode": (0.5,) * 6,
            "client": (0.004,) * 6,
        },
        {"span": (0.104,) * 6, "queue": (0.0,) * 6, "prefill": (0.1,) * 6, "client": (0.004,) * 6},
        level=4.0,
    )
    now = _found({2: (Verdict.PASS, 0.0), 4: (Verdict.FAIL, 0.4)})
    where = split_stored_capacity(now, kept)
    assert isinstance(where, WhereTimeWent) and where.moved[0].component == "queue"
    missed = split_stored_capacity(_found({1: (Verdict.FAIL, 1.0)}), kept)
    assert isinstance(missed, NoSplit) and "no round at concurrency 4" in missed.reason
    assert split_stored_capacity(recorded, None) is NOT_RECORDED


def test_a_component_zero_or_untimed_on_a_side_is_said_not_gateable_as_a_ratio() -> None:
    config = parse_marker(
        (),
        {
            "server": Server.llamacpp(slots=1),
            "reference": Server.llamacpp(slots=4),
            "expect": {"queue_time.p50": ">= 2", "decode_time.p50": "<= 1.1"},
        },
    )
    outcome = evaluate_ab(clocked_side(0.3, 1), clocked_side(0.0, 2), config.criteria, GateSettings())
    # the reference's queue is a few ms (above 0): gated; this clock has no "unaccounted": not in the samples at all
    assert "queue_time.p50" in {c.figure for c in outcome.comparisons}
    said = [note_text(n) for n in outcome.notes if isinstance(n, NoValue)]
    assert said == []
    zero = evaluate_ab(clocked_side(0.3, 1), clocked_side(0.0, 2), _expect("unaccounted_time.p50"), GateSettings())
    (note,) = [note_text(n) for n in zero.notes if isinstance(n, NoValue)]
    assert note.startswith("unaccounted_time.p50: no value above 0 on both sides to compare") and "ratio" in note


def _expect(figure: str) -> Criteria:
    return parse_marker(
        (), {"server": Server.llamacpp(slots=1), "reference": Server.llamacpp(slots=4), "expect": {figure: "<= 1.1"}}
    ).criteria


def test_a_recording_of_one_boots_rounds_keeps_its_floor_when_this_run_has_boots_and_a_small_component_gets_one_too() -> (
    None
):
    """The recording kept four rounds of one boot (per_boot False), this run two boots: each side's rounds look steady,
    so without the floor a 0.5 ms shift of a small component would be read as certain. The floor is of the whole
    request's time (0.6 s here), not of the component's own 10 ms."""
    kept = WhereBaseline(
        "per request",
        False,
        {"span": (0.61,) * 4, "queue": (0.010,) * 4, "prefill": (0.1,) * 4, "decode": (0.5,) * 4},
        {"span": (0.11,) * 4, "queue": (0.010,) * 4, "prefill": (0.1,) * 4},
    )
    now = [
        RoundFigures(wall_s=0.6, effective_tps=100.0, requests=4, failures=0, output_tokens=64, boot=boot, clock=clock)
        for boot in range(2)
        for clock in (_clock(0.0105, 0.1, 0.5, 0.0), _clock(0.0105, 0.1, 0.5, 0.0))
    ]
    where = split_stored(now, kept, floor=0.03)
    assert isinstance(where, WhereTimeWent)
    assert where.moved == (), [(c.component, c.lower, c.upper) for c in where.changes]
    (queue,) = [c for c in where.changes if c.component == "queue"]
    assert queue.upper - queue.lower > 0.02, "a floor of 3% of the request's 0.6 s, not of its own 10 ms"
    both = split_stored(now, replace(kept, per_boot=True), floor=0.03)
    assert isinstance(both, WhereTimeWent) and both.moved, "boots on both sides: no floor, their own spread"
    assert welch_interval([0.01, 0.01], [0.0105, 0.0105], 0.005, 0.03, (0.6, 0.6))[1] > 0.01


def test_the_remainder_of_an_engine_that_times_no_queue_is_called_a_wait_for_a_slot_where_requests_waited() -> None:
    """llama.cpp times no wait for a slot: its remainder grows with the deferred requests its gauge shows, and the
    line says so; with nothing waiting, the remainder keeps its name."""
    grew = ComponentChange("unaccounted", 0.01, 0.5, 0.49, 1.0, 0.4, 0.6)
    span = ComponentChange("end to end", 0.6, 1.09, 0.49, None, 0.4, 0.6)
    where = WhereTimeWent("end", "per request", 5, span, (grew,), (StateChange("waiting_peak", 0.0, 3.0),))
    assert where_line(where).startswith("where the time went: unaccounted (a wait for a slot, untimed) +0.49 s (100%)")
    quiet = replace(where, state=())
    assert where_line(quiet).startswith("where the time went: unaccounted +0.49 s (100%)")


def test_a_decode_that_moved_with_the_answers_length_says_so_with_decode_a_token_on_each_side() -> None:
    """Answers 25% longer on an unpinned workload: decode +0.12 s is said beside 64 -> 80 tokens a request, and decode
    a token did not move; the same decode with lengths alike says nothing of lengths."""
    decode = ComponentChange("decode", 0.5, 0.625, 0.125, 1.0, 0.1, 0.15)
    span = ComponentChange("end to end", 0.6, 0.725, 0.125, None, 0.1, 0.15)
    where = WhereTimeWent("end", "per request", 5, span, (decode,), tokens=(64.0, 80.0))
    line = where_line(where)
    assert line.endswith("; answers 64 -> 80 tokens a request, decode a token 7.8 ms -> 7.8 ms"), line
    assert "answers" not in where_line(replace(where, tokens=(64.0, 65.0)))
