"""The orchestration core (run/: the search for a verdict, the canary, a capacity search, the stage) on fake servers
and players (fakes.py): the real search, canary and gate decide, in milliseconds, on rounds of known speed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_swarm import Server
from pytest_swarm.gate.statistics import Verdict
from pytest_swarm.marker.parse import parse_marker
from pytest_swarm.specs import PlannedItem

from .fakes import FakeBox, measure, planned, session

FAST = Server.llamacpp(slots=4, threads=2)
SLOW = Server.llamacpp(slots=4, threads=1)
"""Two specs apart from the default canary's (the embedded engine, four slots), which the box runs at 100 tok/s."""


def test_an_ab_item_stops_as_soon_as_a_regression_is_decided(tmp_path: Path) -> None:
    """A candidate 30% slower than its reference: FAIL, decided well before max_pairs, both sides booted together
    and rebooted between blocks of pairs."""
    box = FakeBox({FAST: 100.0, SLOW: 70.0})
    item = planned(4, server=SLOW, reference=FAST, concurrency=4, max_tokens=32, max_pairs=60)
    result = measure(session(box, tmp_path, [item]), item)
    assert result.outcome is not None and result.outcome.verdict is Verdict.FAIL, result.outcome
    assert result.undecided is None, "decided, not stopped by its budget"
    pairs = len(result.result.rounds)
    assert item.config.budget.min_pairs <= pairs < 20, pairs
    assert {spec for spec, _ in box.boots} == {FAST, SLOW} and len(box.boots) >= 4, "a boot of both sides a block"


def test_the_sides_take_turns_to_boot_first(tmp_path: Path) -> None:
    """On the CPU the sides boot one after the other; in one fixed order, whatever the order does would read as a
    difference between the sides, so the order alternates from one boot of both sides to the next."""
    box = FakeBox({FAST: 100.0, SLOW: 100.0}, noise=0.05, seed=3)
    item = planned(4, server=SLOW, reference=FAST, concurrency=4, max_tokens=32, max_pairs=12)
    measure(session(box, tmp_path, [item]), item)
    booted = [spec for spec, _ in box.boots]
    assert len(booted) >= 6 and len(booted) % 2 == 0, booted
    assert booted == [spec for boot in range(len(booted) // 2) for spec in ((SLOW, FAST), (FAST, SLOW))[boot % 2]]


def test_an_ab_item_against_itself_never_fails_and_an_exhausted_budget_says_so(tmp_path: Path) -> None:
    """The same speed on both sides with noise: never FAIL. With max_pairs too small to decide, the search stops
    there and says which budget ended it."""
    box = FakeBox({FAST: 100.0, SLOW: 100.0}, noise=0.05, seed=3)
    item = planned(4, server=SLOW, reference=FAST, concurrency=4, max_tokens=32, max_pairs=3)
    result = measure(session(box, tmp_path, [item]), item)
    assert result.outcome is not None and result.outcome.verdict is not Verdict.FAIL
    assert result.undecided == "the search ended undecided at max_pairs=3"
    assert len(result.result.rounds) == 3


def test_a_pair_a_neighbour_spoiled_is_played_again(tmp_path: Path) -> None:
    """The search hands its players the disturbed-pair rule: a pair whose halves ran under host loads 1.5 cores apart
    is played again, not counted, and the gate says how many it left out."""
    box = FakeBox({FAST: 100.0, SLOW: 70.0}, neighbour_every=3)
    item = planned(4, server=SLOW, reference=FAST, concurrency=4, max_tokens=32)
    result = measure(session(box, tmp_path, [item]), item)
    assert box.pairs_spoiled > 0
    assert all(r.conditions.other_cpu_cores == 0.0 for r in result.result.rounds), "only undisturbed pairs counted"
    assert result.outcome is not None and result.outcome.verdict is Verdict.FAIL


def test_a_stored_baseline_checked_beside_its_canary_cancels_the_runners_drift(tmp_path: Path) -> None:
    """Recorded beside the canary, then checked on a runner 25% slower for every server: PASS (the item's figures
    relative to the canary's did not move). The item alone 25% slower on the same runner: FAIL."""
    item = planned(4, server=FAST, concurrency=4, max_tokens=32)
    box = FakeBox({FAST: 100.0}, seed=1)
    recorded = measure(session(box, tmp_path, [item], update_baselines=True), item)
    assert recorded.canary is not None, "recorded beside the canary"
    assert (tmp_path / "testbox.yaml").is_file()

    drifted = FakeBox({FAST: 100.0}, slowdown=1.25, seed=2)
    checked = measure(session(drifted, tmp_path, [item]), item)
    assert checked.outcome is not None and checked.outcome.verdict is Verdict.PASS, checked.outcome
    assert checked.result.effective_tps < 0.85 * recorded.result.effective_tps, "absolute figures did drop"

    regressed = FakeBox({FAST: 75.0}, seed=2)
    failed = measure(session(regressed, tmp_path, [item]), item)
    assert failed.outcome is not None and failed.outcome.verdict is Verdict.FAIL, failed.outcome


def test_without_the_canary_the_same_drift_fails_the_stored_baseline(tmp_path: Path) -> None:
    """The control for the test above: without a canary (canary=False) the gate compares absolute figures, and the
    slower runner fails the same server."""
    item = planned(4, server=FAST, concurrency=4, max_tokens=32, rounds=2, boots=3, canary=False)
    measure(session(FakeBox({FAST: 100.0}, seed=1), tmp_path, [item], update_baselines=True), item)
    drifted = measure(session(FakeBox({FAST: 100.0}, slowdown=1.25, seed=2), tmp_path, [item]), item)
    assert drifted.outcome is not None and drifted.outcome.verdict is Verdict.FAIL, drifted.outcome


@pytest.mark.parametrize(("slots", "carried"), [(1, 1), (3, 3), (5, 5), (8, 8)])
def test_a_capacity_search_finds_the_last_level_whose_condition_holds(tmp_path: Path, slots: int, carried: int) -> None:
    """Agents past the slots wait a whole answer (0.32 s here) for their first token, so TTFT p95 < 0.2 holds up to
    the slot count exactly; the search finds it and reuses one boot across its levels."""
    spec = Server.llamacpp(slots=slots)
    item = planned(1, server=spec, capacity={"concurrency": (1, 8)}, max_tokens=32, interactive={"ttft.p95": "< 0.2"})
    result = measure(session(FakeBox({spec: 100.0}), tmp_path, [item]), item)
    assert result.capacity is not None
    assert result.capacity.capacity == carried, [(s.level, s.verdict) for s in result.capacity.steps]
    assert result.capacity.bounded == (carried < 8)


def test_a_search_stops_at_the_last_look_not_at_a_larger_budget(tmp_path: Path) -> None:
    """Nothing decides past the 40th sample (gate/looks.py): a search whose budget would allow more stops there and
    says so, instead of measuring what cannot change its verdict."""
    box = FakeBox({FAST: 100.0, SLOW: 100.0}, noise=0.3, seed=5)
    item = planned(
        4, server=SLOW, reference=FAST, concurrency=4, max_tokens=32, max_pairs=120, tolerance=0.01, pairing="boots"
    )
    result = measure(session(box, tmp_path, [item]), item)
    assert result.undecided is not None and "at its last look, sample 40" in result.undecided, result.undecided
    assert len({r.boot for r in result.result.rounds}) == 40, "a boot a side, forty pairs of boots"


def _levels(**marker: Any) -> list[PlannedItem]:
    """A sweep's items, one a level, as the plugin plans them."""
    config = parse_marker((), marker)
    return [
        PlannedItem(f"test_x.py::test_sweep[c{level}]", "test_x.py::test_sweep", config, level, config.load(level))
        for level in config.levels
    ]


def test_a_sweeps_levels_are_measured_on_the_same_boots_each_deciding_on_its_own_samples(tmp_path: Path) -> None:
    """An A/B sweep whose levels boot the same two servers (run/round_pairs.py): each boot of both sides plays every
    undecided level's pairs, so a sample's boots are paid once for both levels; each level keeps its own rounds, at
    its own concurrency, and its own verdict; the second level's item boots nothing, and its notes say so."""
    box = FakeBox({FAST: 100.0, SLOW: 70.0}, noise=0.05, seed=4)
    c1, c4 = _levels(server=SLOW, reference=FAST, concurrency=[1, 4], max_tokens=32)
    measuring = session(box, tmp_path, [c1, c4])
    first = measure(measuring, c1)
    boots = len(box.boots)
    second = measure(measuring, c4)
    assert len(box.boots) == boots, "the second level was measured on the first one's boots"
    for result, level in ((first, 1), (second, 4)):
        assert result.outcome is not None and result.outcome.verdict is Verdict.FAIL, result.outcome
        assert {r.requests for r in result.result.rounds} == {level}, "each level's rounds at its concurrency"
        assert result.pairing is not None
        assert result.pairing.shared_with == ("test_sweep[c1]", "test_sweep[c4]"), result.pairing
    samples = [len({r.boot for r in result.result.rounds}) for result in (first, second)]
    assert boots == 2 * max(samples), "a boot of both sides a sample, whichever level needed more"
    assert min(samples) >= 5, "each level's first look is at its 5th sample"


def test_levels_that_cannot_pair_in_rounds_are_each_measured_on_boots_of_their_own(tmp_path: Path) -> None:
    """Boot pairs (a boot a side, one up at a time) play one item's pairs per boot: a sweep's levels are measured
    apart, each level's item booting its own."""
    box = FakeBox({FAST: 100.0, SLOW: 70.0}, noise=0.05, seed=4)
    c1, c4 = _levels(server=SLOW, reference=FAST, concurrency=[1, 4], max_tokens=32, pairing="boots")
    measuring = session(box, tmp_path, [c1, c4])
    first = measure(measuring, c1)
    boots = len(box.boots)
    second = measure(measuring, c4)
    assert boots == len({r.boot for r in first.result.rounds}) * 2 and len(box.boots) > boots
    assert second.pairing is not None and second.pairing.shared_with == (), second.pairing
